#!/usr/bin/env python3
"""Prints the names of this build's programs that the plain add_test() tests with one of the
given labels run (the build-tree paths among their arguments), for scripts/gpu_check.sh, which
builds them. Test binaries registered with gtest_discover_tests are found by the script itself.

    python3 scripts/ctest_label_programs.py BUILD_DIR gpu torch2
"""
import os
import re
import sys


def main():
    build = os.path.abspath(sys.argv[1])
    labels = set(sys.argv[2:])
    programs = set()
    for root, _, files in os.walk(build):
        if "CTestTestfile.cmake" not in files:
            continue
        with open(os.path.join(root, "CTestTestfile.cmake")) as f:
            lines = f.read().splitlines()
        commands = {}
        for line in lines:
            m = re.match(r"add_test\((\S+) (.*)\)$", line)
            if m:
                commands[m.group(1)] = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
                continue
            m = re.match(r'set_tests_properties\((\S+) PROPERTIES .*?LABELS "([^"]*)"', line)
            if m and labels & set(m.group(2).split(";")):
                for arg in commands.get(m.group(1), []):
                    if arg.startswith(build + "/") and not os.path.isdir(arg):
                        programs.add(os.path.basename(arg))
    print(" ".join(sorted(programs)))


if __name__ == "__main__":
    main()
