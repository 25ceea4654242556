# find_package(MoonmathCommon CONFIG): moonmath-common's CMake package, the one prologue every op package's
# CMakeLists.txt uses. Found in the checkout (common/cmake/) or inside an installed moonmath-common wheel
# (moonmath_common/data/cmake/, on CMAKE_PREFIX_PATH through the wheel's `cmake.prefix` entry point).
# Provides MOONMATH_COMMON_DIR (holding include/ and cmake/), Python (Interpreter, Development.Module)
# and moonmath_add_code_objects() (MoonmathCodeObjects.cmake).
get_filename_component(MOONMATH_COMMON_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
include("${CMAKE_CURRENT_LIST_DIR}/MoonmathCodeObjects.cmake")
