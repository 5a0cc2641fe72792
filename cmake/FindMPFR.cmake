# FindMPFR: GNU MPFR and the GMP it is built on (Debian's libmpfr-dev, which depends on
# libgmp-dev), for Boost.Multiprecision's mpfr_float_backend. Neither ships a CMake package
# configuration, so this module finds the header and the libraries and defines
#   MPFR::MPFR   imported target: mpfr.h's directory, libmpfr and libgmp
#   MPFR_FOUND   as find_package_handle_standard_args sets it
# Used only by properties/reference/ (the fast contraction's second oracle).
find_path(MPFR_INCLUDE_DIR mpfr.h)
find_path(GMP_INCLUDE_DIR gmp.h PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
find_library(MPFR_LIBRARY mpfr)
find_library(GMP_LIBRARY gmp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MPFR
  REQUIRED_VARS MPFR_LIBRARY GMP_LIBRARY MPFR_INCLUDE_DIR GMP_INCLUDE_DIR)
if(MPFR_FOUND AND NOT TARGET MPFR::MPFR)
  add_library(MPFR::MPFR INTERFACE IMPORTED)
  set_target_properties(MPFR::MPFR PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${MPFR_INCLUDE_DIR};${GMP_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${MPFR_LIBRARY};${GMP_LIBRARY}")
endif()
mark_as_advanced(MPFR_INCLUDE_DIR GMP_INCLUDE_DIR MPFR_LIBRARY GMP_LIBRARY)
