"""``from training_clusters.constructs import X`` works for every advertised name, without loading jsii early."""

from __future__ import annotations

import subprocess
import sys

import pytest

import training_clusters.constructs as package


@pytest.mark.parametrize("name", package.__all__)
def test_every_advertised_name_resolves(name: str) -> None:
    assert getattr(package, name).__name__ == name


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'TrainingNetwork2'"):
        package.TrainingNetwork2  # noqa: B018


def test_importing_the_package_does_not_start_jsii() -> None:
    code = "import sys, training_clusters.constructs, training_clusters.config; print('jsii' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
