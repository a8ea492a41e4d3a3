#include "iez.h"
const char *iez_version(void) { return "0.1.0"; }
