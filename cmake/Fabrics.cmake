# Host libraries for platform discovery and the fabrics (docs/results.md 9.1 platform, docs/architecture.md "Platform
# facts"), found with pkg-config. EPSUITE_WITH_{LIBFABRIC,VERBS}=AUTO turns each on when found, ON makes a
# missing library a configure error, OFF skips it. hwloc is used whenever it is found.
#
# libfabric and libibverbs are never linked: epsuite loads them at run time with dlopen
# (impls/runtime/dynamic_library.hpp says why), so their targets carry only the headers.
#
# Results: EPS_HAVE_LIBFABRIC + eps_libfabric_headers, EPS_HAVE_VERBS + eps_verbs_headers, EPS_HAVE_HWLOC +
# PkgConfig::EPS_HWLOC; link `eps_fabric_libs` to get the found ones with the matching EPS_HAVE_* compile
# definitions: hwloc linked, libfabric and libibverbs through their run-time loaders (eps_fi_api in
# impls/fabric/libfabric, eps_verbs_api in impls/fabric/verbs).
include_guard(GLOBAL)
find_package(PkgConfig REQUIRED)

# eps_find_fabric_library(OPTION_VAR HAVE_VAR PREFIX MODULE)
function(eps_find_fabric_library option have prefix module)
  set(${have} OFF PARENT_SCOPE)
  if(${option} STREQUAL "OFF")
    message(STATUS "epsuite: ${module} off (${option}=OFF)")
    return()
  endif()
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(${prefix}_FOUND)
    set(${have} ON PARENT_SCOPE)
    message(STATUS "epsuite: ${module} ${${prefix}_VERSION} found")
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but pkg-config cannot find ${module} (install its -dev package, ci/setup)")
  else()
    message(STATUS "epsuite: ${option}=AUTO turned off: pkg-config cannot find ${module}")
  endif()
endfunction()

# eps_headers_only(NAME IMPORTED): an INTERFACE target with the include directories and compile options of
# the pkg-config target IMPORTED and none of its libraries, for a library loaded with dlopen.
# The properties are copied now: IMPORTED may be a directory-scoped target (libefa's), which a generator
# expression could not see from the directories that consume NAME.
function(eps_headers_only name imported)
  add_library(${name} INTERFACE)
  get_target_property(dirs ${imported} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    target_include_directories(${name} INTERFACE ${dirs})
  endif()
  get_target_property(options ${imported} INTERFACE_COMPILE_OPTIONS)
  if(options)
    target_compile_options(${name} INTERFACE ${options})
  endif()
endfunction()

eps_find_fabric_library(EPSUITE_WITH_LIBFABRIC EPS_HAVE_LIBFABRIC EPS_LIBFABRIC libfabric)
eps_find_fabric_library(EPSUITE_WITH_VERBS EPS_HAVE_VERBS EPS_VERBS libibverbs)
set(EPS_WITH_HWLOC AUTO)
eps_find_fabric_library(EPS_WITH_HWLOC EPS_HAVE_HWLOC EPS_HWLOC hwloc)

add_library(eps_fabric_libs INTERFACE)
if(EPS_HAVE_LIBFABRIC)
  eps_headers_only(eps_libfabric_headers PkgConfig::EPS_LIBFABRIC)
  target_link_libraries(eps_fabric_libs INTERFACE eps_fi_api)
  target_compile_definitions(eps_fabric_libs INTERFACE EPS_HAVE_LIBFABRIC=1)
endif()
if(EPS_HAVE_VERBS)
  eps_headers_only(eps_verbs_headers PkgConfig::EPS_VERBS)
  target_link_libraries(eps_fabric_libs INTERFACE eps_verbs_api)
  target_compile_definitions(eps_fabric_libs INTERFACE EPS_HAVE_VERBS=1)
endif()
if(EPS_HAVE_HWLOC)
  target_link_libraries(eps_fabric_libs INTERFACE PkgConfig::EPS_HWLOC)
  target_compile_definitions(eps_fabric_libs INTERFACE EPS_HAVE_HWLOC=1)
endif()
target_link_libraries(eps_fabric_libs INTERFACE ${CMAKE_DL_LIBS})
