// Checks of the device execution model (docs/devices.md 12.1-12.7, SPEC 14.6) written once over a Device,
// so that the `cpu` and `cpu-isolated` devices, the host test plugin and a real GPU run the same cases.
// Each returns a GoogleTest assertion naming the first mismatch. Expected values are written here (byte
// patterns, counts), never read back from the code under test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "impls/device/device.hpp"

namespace eps::device::testing {

// A queue held by a wait_value runs nothing behind it (a copy, a fill, a kernel, a write_value), is not
// idle, and runs all of it in order once another queue writes the awaited value.
::testing::AssertionResult check_queue_order(Device& device);
// 32- and 64-bit write_value / wait_value with >= and ==, a wait already satisfied, and the argument
// refusals (misaligned or null addresses, 32-bit values >= 2^32, a timeout <= 0).
::testing::AssertionResult check_stream_values(Device& device);
// Events: done before any record, not done behind a held wait, done after; another queue waits for an
// event before its later work; elapsed_seconds >= 0 between two done events and refused before they are.
::testing::AssertionResult check_events(Device& device);
// Graph capture and replay: captured copies, a fill, a kernel and a write_value do not run at capture and
// run in order at each replay with the inputs of that moment; synchronize and record are refused while
// capturing; a replay's host<->device copies are counted each time.
::testing::AssertionResult check_graphs(Device& device);
// The copy ledger: host->device and device->host copies counted (synchronous and enqueued), device->device
// and host->host not; reset zeroes it.
::testing::AssertionResult check_copy_ledger(Device& device);
// Host memory registered with the device is written by write_value and released by the host for a
// wait_value.
::testing::AssertionResult check_host_registration(Device& device);
// export_memory refuses what is not the start of a device allocation (or too many bytes); import_memory
// refuses a handle of another backend.
::testing::AssertionResult check_ipc_refusals(Device& device);
// Exports a device buffer, starts this test binary again as a child (`--gtest_filter=IpcChild.*`) that opens
// the device `spec` names, imports the buffer, checks the first half and writes the second half, and checks
// that half here once the child exited (60 s deadline).
::testing::AssertionResult check_ipc_across_processes(Device& device, const std::string& spec);
// The child's side of check_ipc_across_processes; skipped (false) when this process is not such a child.
::testing::AssertionResult ipc_child(bool* is_child);

}  // namespace eps::device::testing
