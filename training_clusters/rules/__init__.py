"""Validation rules, by domain, free of CDK imports: the constructs and the environment file share them.

``network``, ``lustre``, ``logs``, ``hyperpod``, ``parallelcluster`` and ``eks`` each hold the rules of one
service. Every ``*_problem`` function returns ``None`` when the value is fine, else the sentence that
explains what is allowed and what was received; the caller prefixes the field (a construct prop, with the
construct's path, or an environment-file path), so both report a mistake in the same words.
"""
