/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CRC-32C (Castagnoli), the checksum of the vblk superblock: a portable
 * slice-by-8 table path and, on x86-64 CPUs that have it, the SSE4.2 crc32
 * instruction (picked once at run time). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* CRC-32C (Castagnoli, reflected poly 0x82F63B78). Start with crc=0;
 * chaining: vb_crc32c (vb_crc32c (0, a, n), b, m) == crc of a||b.
 * vb_crc32c (0, "123456789", 9) == 0xE3069283. */
guint32 vb_crc32c (guint32 crc, const void *data, gsize len);

/* The same function, always through the portable tables (for tests that
 * compare it with the hardware path). */
guint32 vb_crc32c_software (guint32 crc, const void *data, gsize len);

G_END_DECLS
