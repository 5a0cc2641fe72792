// The owner of the test programs' precompiled headers (shardcheck_test_pch in
// properties/CMakeLists.txt): CMake builds the precompiled header with this file's options, and
// the test programs reuse it. Nothing here.
