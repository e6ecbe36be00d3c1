# SPDX-License-Identifier: BSD-2-Clause
# ---------------------------------------------------------------------------
# The installed library (issue 30): tests/install.sh runs `make install
# DESTDIR=...` of this build tree and builds the example of shmpool(3)
# against the installed header and shmpool.pc.  In every variant: the
# library is installed by all of them.
# ---------------------------------------------------------------------------
TESTS += tests/install.sh
EXTRA_DIST += tests/install.sh
AM_TESTS_ENVIRONMENT += \
	MAKE='$(MAKE)'; export MAKE; \
	CC='$(CC)'; export CC; \
	PKG_CONFIG='$(PKG_CONFIG)'; export PKG_CONFIG; \
	INSTALL_LIBDIR='$(libdir)'; export INSTALL_LIBDIR; \
	INSTALL_INCLUDEDIR='$(includedir)'; export INSTALL_INCLUDEDIR; \
	INSTALL_MANDIR='$(mandir)'; export INSTALL_MANDIR;
