/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — entry point: parse the command line, report, run the master. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "poold.h"

int main(int argc, char **argv)
{
    pd_config_t cfg;
    char err[256];

    switch (pd_config_parse(&cfg, argc, argv, err, sizeof(err))) {
    case PD_CONFIG_HELP:
        pd_config_usage(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    case PD_CONFIG_VERSION:
        printf("poold %s (allocator %s)\n", PACKAGE_VERSION, pd_alloc_name());
        return fflush(stdout) == 0 ? 0 : 1;
    case PD_CONFIG_ERROR:
        fprintf(stderr, "poold: %s\n", err);
        return 2;
    case PD_CONFIG_RUN:
        break;
    }
    return pd_master_run(&cfg, argv);
}
