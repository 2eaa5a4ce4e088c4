"""What the `epsuite plot` tests share: the fixtures of plot_data/ (schema-valid results documents whose expected
figures are computed by hand in each test file), running `epsuite plot` and epsuite_report.py, and reading
plots.json and report.md."""

import json
import os
import re
import shutil
import sys

from support import expect_usage_error

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_data")


def data(name):
    return os.path.join(DATA, name)


def plot(run, epsuite, inputs, out):
    """`epsuite plot INPUTS --out OUT`, which must pass."""
    result = run([epsuite, "plot", *inputs, "--out", out], timeout=120)
    assert result.returncode == 0, f"epsuite plot exited {result.returncode}"
    return result


def run_directory(tmp_path, documents):
    """A run directory tmp_path/run holding each {name: fixture path} as `name`; returns it."""
    folder = tmp_path / "run"
    folder.mkdir()
    for name, path in documents.items():
        shutil.copyfile(path, folder / name)
    return folder


def plot_and_report(run, epsuite, folder):
    """Plots a run directory's bench-*.json into its plots/ and writes its report.md with epsuite_report.py (next
    to epsuite, where `epsuite run` finds it)."""
    plot(run, epsuite, sorted(str(p) for p in folder.glob("bench-*.json")), folder / "plots")
    report = os.path.join(os.path.dirname(epsuite), "plot", "epsuite_report.py")
    result = run([sys.executable, report, folder], timeout=120)
    assert result.returncode == 0, f"epsuite_report.py exited {result.returncode}"


def bad_input(tmp_path, document):
    """Writes `document` (text, or JSON to serialize) as tmp_path/bad.json; returns its path."""
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def load(name):
    with open(data(name), encoding="utf-8") as f:
        return json.load(f)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def read_index(out_dir):
    """plots.json of out_dir as {file stem: plot}."""
    with open(os.path.join(out_dir, "plots.json"), encoding="utf-8") as f:
        return {os.path.splitext(p["files"][0])[0]: p for p in json.load(f)["plots"]}


def check_files(out_dir, stem, plot_entry):
    """The figure's PNG and SVG, named after its stem, are a PNG and an SVG."""
    assert plot_entry["files"] == [f"{stem}.png", f"{stem}.svg"], f"{stem}: files {plot_entry['files']}"
    with open(os.path.join(out_dir, f"{stem}.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{stem}.png is not a PNG"
    with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
        assert "<svg" in f.read(), f"{stem}.svg is not an SVG"


def read_report(run_dir):
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as f:
        return f.read()


def section(report, title):
    """The text of the '## title' section of report.md, up to the next '## '."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    assert match is not None, f"report.md has no '## {title}' section"
    return match.group(1)


def png_links(text):
    return re.findall(r"\[PNG\]\(plots/([^)]+)\.png\)", text)


def table_rows(text):
    """The rows of a markdown table in text, header included, separator left out."""
    return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def check_links(report, plots, title, op, expected):
    """Every figure linked once: those of `op` (the stems `expected`) under the '## title' section, the others
    under Plots. Returns the op's stems."""
    stems = sorted(stem for stem, p in plots.items() if p.get("op") == op)
    assert stems == sorted(expected), f"{op} figures {stems}, expected {sorted(expected)}"
    links = png_links(section(report, title))
    assert sorted(links) == stems, f"the {title} section links {links}"
    others = sorted(stem for stem in plots if stem not in stems)
    assert others and sorted(png_links(section(report, "Plots"))) == others, "the Plots section's links"
    assert len(png_links(report)) == len(plots), f"report.md links {len(png_links(report))} PNG figures"
    return stems


def without(doc, *path):
    """doc with the key at path removed."""
    node = doc
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return doc


def expect_plot_refused(run, epsuite, tmp_path, document, message):
    """`epsuite plot results_a.json BAD --out OUT` exits 2 with one message and draws nothing."""
    out = tmp_path / "plots"
    result = run([epsuite, "plot", data("results_a.json"), bad_input(tmp_path, document), "--out", out], timeout=120)
    expect_usage_error(result, message, nothing_at=[out])
