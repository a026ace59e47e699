# CPack: `cpack` in a build folder makes the binary package (what `cmake --install`
# installs: the library, headers, CMake package, cudakit.pc and, with the tools, the
# command), and `cpack --config CPackSourceConfig.cmake` the source package (the tree
# without build folders, Git data or local dependency copies). Both are .tar.gz.
set(CPACK_PACKAGE_NAME cudakit)
set(CPACK_PACKAGE_VENDOR cudakit)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_GENERATOR TGZ)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME cudakit-${PROJECT_VERSION}-source)
# Anchored at the source folder (tests/build_checks is not a build folder); a "." in its
# path matches any character, which is harmless here.
set(CPACK_SOURCE_IGNORE_FILES "^${PROJECT_SOURCE_DIR}/build[^/]*/" "^${PROJECT_SOURCE_DIR}/\\\\.(git|deps|whl|gl)(/|$)"
                              "/__pycache__/" "\\\\.swp$")
include(CPack)
