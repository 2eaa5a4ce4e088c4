// The figures of `epsuite plot FILE... --out DIR` (harness/cli/plot.hpp) and `epsuite run`: results documents
// (docs/results.md 9.1) drawn as PNG and SVG by the matplotlib script harness/plot/epsuite_plot.py (Agg
// backend), which the build copies next to the executable (<dir of epsuite>/plot/epsuite_plot.py) with the
// report script and epsuite_results.py, the one Python reader of results documents that both use. The
// script's docstring lists the figures; it also writes DIR/plots.json, the index of every figure's files and
// series.
//
// Every FILE is read with read_results_file first (results/document.hpp): an unreadable, truncated or
// foreign file, a schema version from the future or an empty results list is bad input (exit 2, one
// message naming the file and field) and nothing is drawn. python3 or matplotlib missing, or the script
// failing otherwise, is an environment error (exit 3). No MPI: the command runs as a plain process.
#pragma once

#include <string>
#include <vector>

#include "reference/common/status.hpp"

namespace eps {

// The installed plot script next to the running executable; kEnvironment when it is not there.
Result<std::string> plot_script_path();
// `<dir of epsuite>/plot/NAME`, where the build copies the python helpers.
Result<std::string> helper_script_path(const std::string& name);

// Writes RUN_DIR/report.md from a run directory (harness/plot/epsuite_report.py).
Status write_run_report(const std::string& run_dir);

// Validates `files` and runs `PYTHON SCRIPT --out out_dir FILE...`; the script's stdout passes through.
// PYTHON is $EPSUITE_PYTHON when set, else the python3 found at configure time (Debian's /usr/bin/python3
// first, which ci/setup gives matplotlib).
Status plot_results(const std::vector<std::string>& files, const std::string& out_dir);

}  // namespace eps
