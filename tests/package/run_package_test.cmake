# Installs BUILD_DIR into WORK_DIR/prefix, builds SOURCE_DIR against it, runs it.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=${SANITIZE}")
endif()
# build_and_run(NAME COMPONENTS [cmake -D flags…]): the consumer project with those components.
function(build_and_run name components)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/${name} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
      -DCMAKE_CXX_COMPILER=${CXX} "-DIDEM_COMPONENTS=${components}" "-DCMAKE_CXX_FLAGS=${flags}"
      "-DCMAKE_EXE_LINKER_FLAGS=${flags}" ${ARGN})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${name})
  run(${WORK_DIR}/${name}/idem_package_consumer)
endfunction()
build_and_run(build "${COMPONENTS}")
# A few components, while the packages only other components need are made unfindable:
# find_package(idem) must not look for them.
if(NARROW_COMPONENTS)
  build_and_run(build-narrow "${NARROW_COMPONENTS}" -DCMAKE_DISABLE_FIND_PACKAGE_RocksDB=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON -DCMAKE_DISABLE_FIND_PACKAGE_yaml-cpp=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
endif()
# A component this installation lacks must fail find_package with a clear message.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build-missing
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix "-DIDEM_COMPONENTS=core;no_such_backend"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "without component no_such_backend")
  message(FATAL_ERROR "find_package(idem COMPONENTS no_such_backend) should fail clearly:\n${out}\n${err}")
endif()
