/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CRC-32C (Castagnoli) for the vblk superblock. The portable path is
 * slice-by-8 over tables built once; on x86-64 the SSE4.2 crc32
 * instruction computes the same function when the CPU has it. Both keep
 * the usual pre/post inversion so that results chain. */
#include "crc32c.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VB_CRC32C_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

#define VB_CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

/* tables[0] is the classic byte table; tables[k][b] is the CRC of byte b
 * followed by k zero bytes, so eight bytes are folded per step. */
static guint32 tables[8][256];

static void
build_tables (void)
{
  for (guint b = 0; b < 256; b++)
    {
      guint32 crc = b;

      for (int bit = 0; bit < 8; bit++)
        crc = (crc >> 1) ^ ((crc & 1) ? VB_CRC32C_POLY : 0);
      tables[0][b] = crc;
    }
  for (guint b = 0; b < 256; b++)
    for (int k = 1; k < 8; k++)
      tables[k][b] = (tables[k - 1][b] >> 8) ^ tables[0][tables[k - 1][b] & 0xff];
}

static guint32
crc32c_tables (guint32 crc, const guint8 *p, gsize len)
{
  crc = ~crc;
  while (len > 0 && ((guintptr) p & 7) != 0)
    {
      crc = (crc >> 8) ^ tables[0][(crc ^ *p++) & 0xff];
      len--;
    }
  while (len >= 8)
    {
      /* Explicit little-endian assembly: the fold is defined on the byte
       * order of the stream, whatever the host's. */
      guint32 lo
          = (guint32) p[0] | (guint32) p[1] << 8 | (guint32) p[2] << 16 | (guint32) p[3] << 24;
      guint32 hi
          = (guint32) p[4] | (guint32) p[5] << 8 | (guint32) p[6] << 16 | (guint32) p[7] << 24;

      lo ^= crc;
      crc = tables[7][lo & 0xff] ^ tables[6][(lo >> 8) & 0xff] ^ tables[5][(lo >> 16) & 0xff]
            ^ tables[4][lo >> 24] ^ tables[3][hi & 0xff] ^ tables[2][(hi >> 8) & 0xff]
            ^ tables[1][(hi >> 16) & 0xff] ^ tables[0][hi >> 24];
      p += 8;
      len -= 8;
    }
  while (len > 0)
    {
      crc = (crc >> 8) ^ tables[0][(crc ^ *p++) & 0xff];
      len--;
    }
  return ~crc;
}

#ifdef VB_CRC32C_HAVE_SSE42
__attribute__ ((target ("sse4.2"))) static guint32
crc32c_sse42 (guint32 crc, const guint8 *p, gsize len)
{
  guint64 c = (guint32) ~crc;

  while (len > 0 && ((guintptr) p & 7) != 0)
    {
      c = _mm_crc32_u8 ((guint32) c, *p++);
      len--;
    }
  while (len >= 8)
    {
      guint64 word;

      memcpy (&word, p, sizeof word); /* x86 is little-endian */
      c = _mm_crc32_u64 (c, word);
      p += 8;
      len -= 8;
    }
  while (len > 0)
    {
      c = _mm_crc32_u8 ((guint32) c, *p++);
      len--;
    }
  return ~(guint32) c;
}
#endif

typedef guint32 (*CrcFunc) (guint32 crc, const guint8 *p, gsize len);

static CrcFunc
crc32c_pick (void)
{
  static gsize chosen = 0;

  if (g_once_init_enter (&chosen))
    {
      CrcFunc f = crc32c_tables;

      build_tables ();
#ifdef VB_CRC32C_HAVE_SSE42
      __builtin_cpu_init ();
      if (__builtin_cpu_supports ("sse4.2"))
        f = crc32c_sse42;
#endif
      g_once_init_leave (&chosen, (gsize) f);
    }
  return (CrcFunc) chosen;
}

guint32
vb_crc32c (guint32 crc, const void *data, gsize len)
{
  g_return_val_if_fail (data != NULL || len == 0, crc);

  return crc32c_pick () (crc, data, len);
}

guint32
vb_crc32c_software (guint32 crc, const void *data, gsize len)
{
  g_return_val_if_fail (data != NULL || len == 0, crc);

  crc32c_pick (); /* builds the tables */
  return crc32c_tables (crc, data, len);
}
