#include "config.h"
#include "check_poold.h"
Suite *make_e2e_suite(void) { return suite_create("e2e"); }
