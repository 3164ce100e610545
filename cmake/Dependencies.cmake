# Finds the system libraries onnx2soap builds on (scripts/setup.sh installs
# them) and exposes each as an imported target.

# LLVM Support: CLI, JSON, Expected/Error, formatv, SHA256, MemoryBuffer, ADT.
# Linked statically (libLLVMSupport.a) so the CLI starts fast.
find_package(LLVM 14 REQUIRED CONFIG)
add_library(onnx2soap_llvm INTERFACE)
llvm_map_components_to_libnames(ONNX2SOAP_LLVM_LIBS support)
target_include_directories(onnx2soap_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
separate_arguments(ONNX2SOAP_LLVM_DEFS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_definitions(onnx2soap_llvm INTERFACE ${ONNX2SOAP_LLVM_DEFS})
target_link_libraries(onnx2soap_llvm INTERFACE ${ONNX2SOAP_LLVM_LIBS})

# OpenSSL's libcrypto (libssl-dev) for SHA-256: strategy files and generated
# projects hash models, weight shards and plans of hundreds of MB, and
# libcrypto uses the CPU's SHA instructions (5 x LLVM's SHA256 here).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# ONNX protobuf classes (libonnx-dev) over libprotobuf.
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)

if(ONNX2SOAP_TESTS AND NOT ONNX2SOAP_FUZZ)
  find_package(GTest REQUIRED)
endif()
if(ONNX2SOAP_BENCH AND NOT ONNX2SOAP_FUZZ)
  find_package(benchmark REQUIRED)
endif()
