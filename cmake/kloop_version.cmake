# Writes OUT (a header) with the source tree's git commit, at every build,
# touching it only when the commit or the dirty state changed.
# Usage: cmake -DSRC=<source dir> -DOUT=<header> -P kloop_version.cmake
find_package(Git QUIET)
set(commit "unknown")
set(dirty 0)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR commit STREQUAL "")
    set(commit "unknown")
  else()
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes ERROR_QUIET)
    if(NOT changes STREQUAL "")
      set(dirty 1)
    endif()
  endif()
endif()
set(text "// Generated at build time by cmake/kloop_version.cmake.\n#pragma once\n#define KLOOP_GIT_COMMIT \"${commit}\"\n#define KLOOP_GIT_DIRTY ${dirty}\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
