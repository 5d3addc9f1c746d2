// spmd/backends/mpi/mpi_c.hpp — MPI's C interface, without the C++ bindings (deprecated
// since MPI-2.2, removed in MPI-3; spmd uses the C functions only, and OpenMPI's C++
// header does not compile cleanly under -Wextra).
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
