/* Stands in for the HEVC encoder x265 that pillow-heif's libheif links (23 MB). Quire only reads HEIC/HEIF
 * pictures, which libde265 decodes; libheif asks for x265 only to write them, and an encoder whose API is
 * missing (NULL) is one libheif reports as unavailable. These are the only two symbols libheif imports from it
 * (packaging/quire.spec checks that before it swaps the library). */
#include <stddef.h>

const void *x265_api_get_217(int bit_depth) {
    (void)bit_depth;
    return NULL;
}

void x265_cleanup(void) {}
