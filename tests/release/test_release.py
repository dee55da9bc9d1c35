"""The release checks can fail: each rule of mk/release.py and mk/licenses.py
broken on a scratch copy of the files it reads (make test-release).

Usage: test_release.py
"""
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mk"))

import licenses  # noqa: E402
import release  # noqa: E402

FILES = ["VERSION", "abi/VERSION", "LICENSE", "README.md", "CHANGELOG.md", "include/leases.h",
         "bindings/rust/Cargo.toml", "bindings/rust/Cargo.lock", "bindings/python/pyproject.toml",
         "bindings/cpp/CMakeLists.txt", "bindings/cpp/cmake/leases.pc.in", "bindings/cpp/cmake/leases-static.pc.in",
         "bindings/cpp/cmake/leasesConfig.cmake.in", "bindings/python/LICENSE", "bindings/rust/LICENSE"]


class Scratch(unittest.TestCase):
    def setUp(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="leases-release-test-"))
        self.addCleanup(shutil.rmtree, self.root)
        for f in FILES + [str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")]:
            (self.root / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / f, self.root / f)  # follows the LICENSE links: real files
        self.version = (ROOT / "VERSION").read_text().strip()

    def edit(self, path: str, old: str, new: str) -> None:
        f = self.root / path
        text = f.read_text()
        self.assertIn(old, text, f"{path} no longer holds {old!r}: update the test")
        f.write_text(text.replace(old, new, 1))

    def fails(self, check: Callable[[], None], *fragments: str) -> None:
        with self.assertRaises(SystemExit) as raised:
            check()
        for fragment in fragments:
            self.assertIn(fragment, str(raised.exception))

    def versions(self, cli: str = "") -> None:
        release.versions(self.root, cli, "")

    def license_fields(self) -> None:
        release.license_fields(self.root)


class TheVersionComesFromOnePlace(Scratch):
    def test_the_committed_files_agree_with_VERSION(self) -> None:
        self.versions()

    def test_a_crate_version_other_than_VERSION_fails_the_check(self) -> None:
        self.edit("bindings/rust/Cargo.toml", f'version = "{self.version}"', 'version = "9.9.9"')
        self.fails(self.versions, "Cargo.toml", "9.9.9")

    def test_a_locked_crate_version_other_than_VERSION_fails_the_check(self) -> None:
        self.edit("bindings/rust/Cargo.lock", f'name = "leases"\nversion = "{self.version}"',
                  'name = "leases"\nversion = "9.9.9"')
        self.fails(self.versions, "Cargo.lock")

    def test_a_python_distribution_version_other_than_VERSION_fails_the_check(self) -> None:
        self.edit("bindings/python/pyproject.toml", f'version = "{self.version}"', 'version = "9.9.9"')
        self.fails(self.versions, "pyproject.toml")

    def test_a_cmake_package_version_not_read_from_VERSION_fails_the_check(self) -> None:
        self.edit("bindings/cpp/CMakeLists.txt", "project(leases VERSION ${LEASES_RELEASE_VERSION}",
                  "project(leases VERSION 9.9.9")
        self.fails(self.versions, "CMakeLists.txt")

    def test_a_pkg_config_version_not_VERSIONs_fails_the_check(self) -> None:
        self.edit("bindings/cpp/cmake/leases.pc.in", "Version: @LEASES_RELEASE_VERSION@", "Version: 9.9.9")
        self.fails(self.versions, "leases.pc.in")

    def test_a_release_version_macro_in_the_header_fails_the_check(self) -> None:
        self.edit("include/leases.h", "#define LEASES_ABI_VERSION 1\n",
                  f'#define LEASES_ABI_VERSION 1\n#define LEASES_VERSION "{self.version}"\n')
        self.fails(self.versions, "LEASES_VERSION")

    def test_a_version_that_is_not_semantic_fails_the_check(self) -> None:
        (self.root / "VERSION").write_text("0.1\n")
        self.fails(self.versions, "not a semantic version")

    def test_a_changelog_without_a_section_for_VERSION_fails_the_check(self) -> None:
        self.edit("CHANGELOG.md", f"\n## {self.version}", "\n## 0.0.9")
        self.fails(self.versions, f"no section '## {self.version}'")

    def test_a_changelog_whose_first_section_is_not_unreleased_fails_the_check(self) -> None:
        self.edit("CHANGELOG.md", "## Unreleased", "## Next")
        self.fails(self.versions, "Unreleased")

    def test_a_doc_naming_an_artifact_of_another_version_fails_the_check(self) -> None:
        self.edit("README.md", f"libleases-{self.version}-py3", "libleases-0.0.9-py3")
        self.fails(self.versions, "README.md", "0.0.9")

    def test_a_cli_reporting_another_version_fails_the_check(self) -> None:
        cli = self.root / "leases"
        cli.write_text("#!/bin/sh\necho 'leases 9.9.9'\n")
        os.chmod(cli, 0o755)
        self.fails(lambda: self.versions(str(cli)), "--version", "9.9.9")


class EveryPackageCarriesTheApacheLicense(Scratch):
    def test_the_committed_files_carry_the_license(self) -> None:
        self.license_fields()

    def test_a_license_file_that_is_not_the_apache_license_fails_the_check(self) -> None:
        (self.root / "LICENSE").write_text("All rights reserved.\n")
        self.fails(self.license_fields, "LICENSE")

    def test_a_readme_without_a_license_section_fails_the_check(self) -> None:
        self.edit("README.md", "## License\n", "## Licence notes\n")
        self.fails(self.license_fields, "README.md")

    def test_a_wheel_without_the_license_field_fails_the_check(self) -> None:
        self.edit("bindings/python/pyproject.toml", 'license = "Apache-2.0"', 'license = "MIT"')
        self.fails(self.license_fields, "pyproject.toml")

    def test_a_crate_without_the_license_field_fails_the_check(self) -> None:
        self.edit("bindings/rust/Cargo.toml", 'license = "Apache-2.0"\n', "")
        self.fails(self.license_fields, "Cargo.toml")

    def test_a_pkg_config_file_without_the_license_fails_the_check(self) -> None:
        self.edit("bindings/cpp/cmake/leases-static.pc.in", "License: Apache-2.0\n", "")
        self.fails(self.license_fields, "leases-static.pc.in")

    def test_a_cmake_package_without_the_license_fails_the_check(self) -> None:
        self.edit("bindings/cpp/cmake/leasesConfig.cmake.in", 'set(leases_LICENSE "Apache-2.0")', "")
        self.fails(self.license_fields, "leasesConfig.cmake.in")


class OnlyLicensesThatAllowApacheUseAreListed(unittest.TestCase):
    def test_an_expression_is_allowed_only_when_each_and_has_an_allowed_or(self) -> None:
        self.assertTrue(licenses.allowed("MIT"))
        self.assertTrue(licenses.allowed("MIT OR Apache-2.0"))
        self.assertTrue(licenses.allowed("(MIT OR Apache-2.0) AND Unicode-3.0"))
        self.assertTrue(licenses.allowed("MIT OR GPL-3.0-only"))
        self.assertFalse(licenses.allowed("GPL-3.0-only"))
        self.assertFalse(licenses.allowed("MIT AND GPL-3.0-only"))
        self.assertFalse(licenses.allowed("(MIT OR Apache-2.0) AND AGPL-3.0-or-later"))
        with self.assertRaises(ValueError):
            licenses.allowed("(MIT OR")

    def test_well_known_texts_are_classified_and_others_are_not(self) -> None:
        bsd = ("Redistribution and use in source and binary forms, with or without\nmodification, are "
               "permitted provided that the following conditions are met:")
        self.assertEqual(licenses.classify_text(bsd), "BSD-2-Clause")
        self.assertEqual(licenses.classify_text(bsd + "\n3. Neither the name of the copyright holder"),
                         "BSD-3-Clause")
        self.assertEqual(licenses.classify_text((ROOT / "LICENSE").read_text()), "Apache-2.0")
        self.assertEqual(licenses.classify_text("Permission is hereby granted, free of charge, to any\n"
                                                "person obtaining a copy of this software"), "MIT")
        self.assertIsNone(licenses.classify_text("GNU GENERAL PUBLIC LICENSE Version 3"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
