"""The repository's licence and citation files say the same as the book's configuration."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_citation_file_is_valid_and_names_the_repository_of_the_config():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] == config["title"]
    assert cff["repository-code"] == config["repository"]["url"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{cff["version"]}"' in pyproject
    assert f'license = "{cff["license"]}"' in pyproject


def test_code_and_text_licences_exist_and_point_to_each_other():
    code, text = (ROOT / "LICENSE").read_text(), (ROOT / "LICENSE-TEXT.md").read_text()
    assert code.startswith("MIT License") and "LICENSE-TEXT.md" in code
    assert "CC BY 4.0" in text and "`LICENSE`" in text
