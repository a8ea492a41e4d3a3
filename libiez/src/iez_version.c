#include "iez.h"
__attribute__((visibility("default"))) const char *iez_version(void) { return "0.1.0"; }
