"""make test-dist: the folder `make dist` wrote passes mk/release.py's check,
and the check fails on copies of it with one thing wrong each: an artifact
whose bytes no longer match SHA256SUMS, a file that is no artifact of the
version, a missing artifact.

Usage: test_dist.py DIST_DIR VERSION
"""
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "mk"))
import release  # noqa: E402

DIST, VERSION = Path(sys.argv[1]).resolve(), sys.argv[2]


class ADistFolderHoldsEveryArtifactOfItsVersionWithMatchingChecksums(unittest.TestCase):
    def copy(self) -> Path:
        d = Path(tempfile.mkdtemp(prefix="leases-dist-test-"))
        self.addCleanup(shutil.rmtree, d)
        shutil.copytree(DIST, d / VERSION)
        return d / VERSION

    def fails(self, folder: Path, fragment: str) -> None:
        with self.assertRaises(SystemExit) as raised:
            release.dist(folder, VERSION)
        self.assertIn(fragment, str(raised.exception))

    def test_the_folder_make_dist_wrote_passes(self) -> None:
        release.dist(DIST, VERSION)

    def test_an_artifact_changed_after_its_checksum_fails(self) -> None:
        d = self.copy()
        crate = d / f"leases-{VERSION}.crate"
        data = bytearray(crate.read_bytes())
        data[-1] ^= 0xFF
        crate.write_bytes(bytes(data))
        self.fails(d, "does not match")

    def test_a_file_that_is_no_artifact_of_the_version_fails(self) -> None:
        d = self.copy()
        (d / f"leases-0.0.9.crate").write_bytes(b"old")
        self.fails(d, "no artifact of")

    def test_a_missing_artifact_fails(self) -> None:
        d = self.copy()
        (d / f"libleases-{VERSION}.tar.gz").unlink()
        self.fails(d, "no sdist")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
