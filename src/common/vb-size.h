/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sizes as people write them, one reading for every part of vblk: driver
 * attributes, policy rules (match.size) and vbmgr's options. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* BYTES, or a number with K, M, G or T (powers of 1024, either case);
 * "iB" or "B" may follow the unit ("1M", "1MiB" and "1MB" are all 2^20
 * bytes, as losetup and mdadm read them). Nothing else: no sign, no
 * blanks, no fraction. Sets VB_ERROR_INVALID_ARGUMENT naming @text when it
 * is not a size or does not fit in 64 bits. */
gboolean vb_size_parse (const char *text, guint64 *out, GError **error);

/* @bytes with the largest unit that divides it ("200G", "1536K", "513"):
 * what vb_size_parse reads back to the same number. */
char *vb_size_format (guint64 bytes);

G_END_DECLS
