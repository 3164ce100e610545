# Programs that run under mpirun, as ctest tests. Included from
# tests/CMakeLists.txt, so paths are relative to tests/. comm_mpi_test checks
# the MPI Comm (runtime_lib/program/MpiComm.cpp) with 2, 3 and 4 ranks (more
# ranks than cores: --oversubscribe), that a stalled peer ends a run with the
# timeout message instead of a hang, and one message past INT_MAX bytes;
# comm_nccl_test is the NCCL counterpart, built but never run here.
if(NOT MPIEXEC_EXECUTABLE)
  message(STATUS "mpiexec not found: MPI tests are not registered")
  return()
endif()

add_executable(comm_mpi_test runtime_program/mpi/CommMpiTest.cpp)
target_link_libraries(comm_mpi_test PRIVATE onnx2soap_runtime_program)

set(ONNX2SOAP_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe)
foreach(Ranks 2 3 4)
  add_test(NAME comm_mpi_np${Ranks}
    COMMAND ${ONNX2SOAP_MPIRUN} -np ${Ranks} $<TARGET_FILE:comm_mpi_test>)
  set_tests_properties(comm_mpi_np${Ranks} PROPERTIES
    TIMEOUT 300 PROCESSORS ${Ranks}
    FAIL_REGULAR_EXPRESSION "FAILED")
endforeach()

# Rank 1 sleeps 30 s; rank 0 must give up after its 2 s timeout, print the
# line once and end the job non-zero well before rank 1 wakes.
foreach(Direction send recv)
  add_test(NAME comm_mpi_timeout_${Direction}
    COMMAND ${CMAKE_COMMAND}
      -DMPIRUN=${MPIEXEC_EXECUTABLE} -DPROGRAM=$<TARGET_FILE:comm_mpi_test>
      -DMODE=timeout-${Direction} -DDIRECTION=${Direction}
      -P ${CMAKE_CURRENT_SOURCE_DIR}/runtime_program/mpi/ExpectTimeout.cmake)
  set_tests_properties(comm_mpi_timeout_${Direction} PROPERTIES
    TIMEOUT 40 PROCESSORS 2)
endforeach()

# 2 GiB + 4 KiB in one send: about 4.3 GB of memory across the two ranks.
add_test(NAME comm_mpi_large
  COMMAND ${ONNX2SOAP_MPIRUN} -np 2 $<TARGET_FILE:comm_mpi_test> large)
set_tests_properties(comm_mpi_large PROPERTIES
  TIMEOUT 300 PROCESSORS 2 RUN_SERIAL ON
  FAIL_REGULAR_EXPRESSION "FAILED")

# The NCCL Comm's checks need one GPU per rank; built (so the NCCL library is
# known to link) but not registered: there is no GPU here. Run by hand:
# mpirun -np 2 bin/comm_nccl_test
if(TARGET onnx2soap_runtime_nccl)
  add_executable(comm_nccl_test runtime_program/mpi/CommNcclTest.cpp)
  target_link_libraries(comm_nccl_test PRIVATE onnx2soap_runtime_nccl)
endif()
