"""The offline gates every template passes: cdk-nag's plugin, cfn-lint, checkov, and the summary ``make synth`` prints."""
