"""Helpers the constructs share and users do not import: validation, security groups, tags, grants, launch templates."""
