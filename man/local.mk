# SPDX-License-Identifier: BSD-2-Clause
# Manual pages, linted by `make check` (tests/manlint.sh).
dist_man_MANS += man/poold.8 man/libshmpool.7 man/shmpool-stat.1 man/shmpool.3
TESTS += tests/manlint.sh
EXTRA_DIST += tests/manlint.sh
