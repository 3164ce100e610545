# Fails when a C++ source of the project is not clang-formatted
# (`make format` fixes it). Run by ctest as the clang_format test.
file(GLOB_RECURSE Sources RELATIVE ${SOURCE_DIR}
  ${SOURCE_DIR}/ir/*.cpp ${SOURCE_DIR}/ir/*.h
  ${SOURCE_DIR}/onnx_import/*.cpp ${SOURCE_DIR}/onnx_import/*.h
  ${SOURCE_DIR}/simulator/*.cpp ${SOURCE_DIR}/simulator/*.h
  ${SOURCE_DIR}/soap_search/*.cpp ${SOURCE_DIR}/soap_search/*.h
  ${SOURCE_DIR}/codegen/*.cpp ${SOURCE_DIR}/codegen/*.h
  ${SOURCE_DIR}/runtime_lib/*.cpp ${SOURCE_DIR}/runtime_lib/*.h
  ${SOURCE_DIR}/runtime_lib/*.cu ${SOURCE_DIR}/runtime_lib/*.cuh
  ${SOURCE_DIR}/cli/*.cpp ${SOURCE_DIR}/cli/*.h
  ${SOURCE_DIR}/tests/*.cpp ${SOURCE_DIR}/tests/*.h
  ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/bench/*.h)
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${Sources}
  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE Result
  ERROR_VARIABLE Errors)
if(NOT Result EQUAL 0)
  string(SUBSTRING "${Errors}" 0 2000 Head)
  message(FATAL_ERROR "clang-format would change these files "
    "(run `make format`):\n${Head}")
endif()
