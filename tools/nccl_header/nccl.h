// nccl.h for the cudakit command where NCCL's own header is not installed: cudakit's
// declarations of the part of NCCL it calls, which match the real header's
// (tests/build_checks/nccl_declarations_check.cpp). Only the NCCL benchmark includes it.
#pragma once

#include "../../src/libraries/nccl_declarations.hpp"
