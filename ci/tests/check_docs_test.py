#!/usr/bin/env python3
"""ci/check-docs on small trees (usage: check_docs_test.py PATH/TO/ci/check-docs): a clean tree passes; a citation of
a missing heading or page, a README command that no test names and the unverified list lacks, one in both places,
and a stale marker or list entry each fail with FILE:LINE (exit 1)."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = None

PAGE = """# A page

Status in this repository: everything.

## 9. Results

### 9.1 The document

### 9.2 The gate
"""

README = """# tool

```sh
build/tool run --out x   # a comment
build/tool compare a.json \\
    b.json
```

```
output, not a command
```
"""

UNVERIFIED = """# Unverified

- `build/tool compare a.json b.json`: needs two machines.
"""

TEST = """# readme-command: build/tool run --out x
# docs/results.md 9.1 and docs/results.md 9.1-9.2
"""


class CheckDocs(unittest.TestCase):
    def tree(self, files):
        root = tempfile.mkdtemp(prefix="check_docs_")
        self.addCleanup(subprocess.run, ["rm", "-rf", root])
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        return root

    def run_check(self, files):
        done = subprocess.run([sys.executable, CHECK, "--root", self.tree(files)], capture_output=True, text=True)
        return done.returncode, done.stdout

    def clean(self):
        return {"docs/results.md": PAGE, "README.md": README, "docs/unverified-commands.md": UNVERIFIED,
                "tests/run_test.cmake": TEST}

    def test_clean_tree_passes(self):
        rc, out = self.run_check(self.clean())
        self.assertEqual(rc, 0, out)
        self.assertIn("3 citations resolve; 2 README commands", out)

    def test_broken_citation_fails_with_file_and_line(self):
        files = self.clean()
        files["src/code.cpp"] = "int x;\n// docs/results.md 9.3: no such subsection\n// see `docs/results.md` 9.1, 9.7\n"
        files["src/other.py"] = "# docs/gone.md 1.1\n# docs/results.md 10\n"
        rc, out = self.run_check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/code.cpp:2: docs/results.md 9.3: the page has no heading '### 9.3'", out)
        self.assertIn("src/code.cpp:3: docs/results.md 9.7", out)
        self.assertIn("src/other.py:1: docs/gone.md 1.1: no such page", out)
        self.assertIn("src/other.py:2: docs/results.md 10: the page has no heading '## 10'", out)
        self.assertNotIn("src/code.cpp:3: docs/results.md 9.1", out)
        self.assertIn("4 problem(s)", out)

    def test_unaccounted_command_fails(self):
        files = self.clean()
        files["tests/run_test.cmake"] = "# docs/results.md 9.1\n"
        rc, out = self.run_check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:4: 'build/tool run --out x' is run by no test", out)

    def test_command_in_both_places_fails(self):
        files = self.clean()
        files["docs/unverified-commands.md"] = UNVERIFIED + "- `build/tool run --out x`: also here\n"
        rc, out = self.run_check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:4: 'build/tool run --out x' is run by a test (tests/run_test.cmake:1) and also "
                      "listed as unverified", out)

    def test_stale_marker_and_entry_fail(self):
        files = self.clean()
        files["tests/old_test.py"] = "# readme-command: build/tool gone\n"
        files["docs/unverified-commands.md"] = UNVERIFIED + "- `build/tool removed --flag`: was here once\n"
        rc, out = self.run_check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("tests/old_test.py:1: 'build/tool gone' is no command of README.md (stale)", out)
        self.assertIn("docs/unverified-commands.md:4: 'build/tool removed --flag' is no command of README.md (stale)",
                      out)


if __name__ == "__main__":
    CHECK = sys.argv.pop(1)
    unittest.main()
