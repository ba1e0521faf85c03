"""CDK-free vocabulary every layer shares: options (enums), capacity, errors, release pins and text tables."""
