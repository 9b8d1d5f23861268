/* hfp4.c - the hfp4 command (being written). */
#include <stdio.h>
#include "hfp4.h"
int main(void) { printf("hfp4 %s\n", hfp4_version_string()); return 0; }
