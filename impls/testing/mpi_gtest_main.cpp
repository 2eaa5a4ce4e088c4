// main() of an MPI test executable: --strict, --timeout and --gtest_* flags (impls/testing/mpi_gtest.hpp).
#include "impls/testing/mpi_gtest.hpp"

int main(int argc, char** argv) { return eps::mpitest::test_main(argc, argv); }
