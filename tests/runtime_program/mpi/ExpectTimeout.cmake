# Runs comm_mpi_test in a timeout mode with 2 ranks and passes when the run
# ends non-zero within 20 s with exactly one timeout line from rank 0.
# Arguments: MPIRUN, PROGRAM, MODE (timeout-send | timeout-recv), DIRECTION.
if(DIRECTION STREQUAL "send")
  set(Expected "train: error: rank 0: no progress for 2 s on send of 67108864 bytes to rank 1 (timeout test); a peer died or is stuck")
else()
  set(Expected "train: error: rank 0: no progress for 2 s on recv of 67108864 bytes from rank 1 (timeout test); a peer died or is stuck")
endif()

string(TIMESTAMP Start "%s")
execute_process(
  COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -np 2 ${PROGRAM} ${MODE}
  RESULT_VARIABLE Result OUTPUT_VARIABLE Output ERROR_VARIABLE Errors
  TIMEOUT 30)
string(TIMESTAMP End "%s")
math(EXPR Seconds "${End} - ${Start}")
message("${Output}${Errors}")
message(STATUS "mpirun ended with '${Result}' after ${Seconds} s")

if(Result EQUAL 0)
  message(FATAL_ERROR "the run succeeded; it should have timed out")
endif()
if(Seconds GREATER 20)
  message(FATAL_ERROR "the run took ${Seconds} s; the timeout is 2 s")
endif()
string(FIND "${Errors}${Output}" "${Expected}" Found)
if(Found EQUAL -1)
  message(FATAL_ERROR "no line '${Expected}'")
endif()
string(REGEX MATCHALL "train: error:" Lines "${Errors}${Output}")
list(LENGTH Lines Count)
if(NOT Count EQUAL 1)
  message(FATAL_ERROR "${Count} 'train: error:' lines; expected one")
endif()
