# Host libraries for platform discovery and the fabrics (docs/results.md 9.1 platform, docs/architecture.md "Platform
# facts"), found with pkg-config. EPSUITE_WITH_{LIBFABRIC,VERBS}=AUTO turns each on when found, ON makes a
# missing library a configure error, OFF skips it. hwloc is used whenever it is found.
#
# Results: EPS_HAVE_LIBFABRIC + PkgConfig::EPS_LIBFABRIC, EPS_HAVE_VERBS + PkgConfig::EPS_VERBS,
# EPS_HAVE_HWLOC + PkgConfig::EPS_HWLOC; link `eps_fabric_libs` to get the found ones with the matching
# EPS_HAVE_* compile definitions.
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

eps_find_fabric_library(EPSUITE_WITH_LIBFABRIC EPS_HAVE_LIBFABRIC EPS_LIBFABRIC libfabric)
eps_find_fabric_library(EPSUITE_WITH_VERBS EPS_HAVE_VERBS EPS_VERBS libibverbs)
set(EPS_WITH_HWLOC AUTO)
eps_find_fabric_library(EPS_WITH_HWLOC EPS_HAVE_HWLOC EPS_HWLOC hwloc)

add_library(eps_fabric_libs INTERFACE)
foreach(lib IN ITEMS LIBFABRIC VERBS HWLOC)
  if(EPS_HAVE_${lib})
    target_link_libraries(eps_fabric_libs INTERFACE PkgConfig::EPS_${lib})
    target_compile_definitions(eps_fabric_libs INTERFACE EPS_HAVE_${lib}=1)
  endif()
endforeach()
target_link_libraries(eps_fabric_libs INTERFACE ${CMAKE_DL_LIBS})
