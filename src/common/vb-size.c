/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sizes as people write them (see vb-size.h): the one parser of "200G"
 * that driver attributes, policy rules and vbmgr share. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-size.h"
#include "vb-error.h"
#include "vb-util.h"

#include <errno.h>
#include <string.h>

/* largest first: vb_size_format picks the first unit that divides */
static const struct {
  char suffix;
  guint64 mult;
} size_units[] = {
  { 'T', G_GUINT64_CONSTANT (1) << 40 },
  { 'G', G_GUINT64_CONSTANT (1) << 30 },
  { 'M', G_GUINT64_CONSTANT (1) << 20 },
  { 'K', G_GUINT64_CONSTANT (1) << 10 },
};

static guint64
unit_of (const char **end)
{
  for (guint i = 0; i < G_N_ELEMENTS (size_units); i++)
    if (g_ascii_toupper (**end) == size_units[i].suffix)
      {
        (*end)++;
        /* "1M", "1MiB" and "1MB" all mean 2^20 bytes */
        if (g_ascii_strcasecmp (*end, "iB") == 0 || g_ascii_strcasecmp (*end, "B") == 0)
          *end += strlen (*end);
        return size_units[i].mult;
      }
  return 1;
}

gboolean
vb_size_parse (const char *text, guint64 *out, GError **error)
{
  char *digits_end = NULL;
  const char *end;
  guint64 v, mult;

  g_return_val_if_fail (text != NULL && out != NULL, FALSE);
  if (!g_ascii_isdigit (*text))
    goto not_size;
  errno = 0;
  v = g_ascii_strtoull (text, &digits_end, 10);
  if (errno != 0)
    goto not_size;
  end = digits_end;
  mult = unit_of (&end);
  if (*end != '\0' || (v != 0 && mult > G_MAXUINT64 / v))
    goto not_size;
  *out = v * mult;
  return TRUE;

  not_size : {
    /* a huge text is shown cut */
    g_autofree char *shown = vb_shown (text);
    g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                 _ ("'%s' is not a size (bytes, or a number with K, M, G or T)"), shown);
    return FALSE;
  }
}

char *
vb_size_format (guint64 bytes)
{
  for (guint i = 0; bytes != 0 && i < G_N_ELEMENTS (size_units); i++)
    if (bytes % size_units[i].mult == 0)
      return g_strdup_printf ("%" G_GUINT64_FORMAT "%c", bytes / size_units[i].mult,
                              size_units[i].suffix);
  return g_strdup_printf ("%" G_GUINT64_FORMAT, bytes);
}
