/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Device names, object paths and component sources (see vb-util.h). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-util.h"
#include "vb-error.h"

#include <limits.h>
#include <string.h>

gboolean
vb_name_is_valid (const char *name, const char *what, GError **error)
{
  gsize len;

  if (name == NULL || *name == '\0')
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s: must not be empty"), what);
      return FALSE;
    }
  len = strlen (name);
  if (len > VB_NAME_MAX)
    {
      g_autofree char *shown = vb_shown (name);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s '%s': %zu characters, at most %d are allowed"), what, shown, len,
                   VB_NAME_MAX);
      return FALSE;
    }
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '.' && *p != '_' && *p != '-')
      {
        g_autofree char *valid = g_utf8_make_valid (name, -1);
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("%s '%s': character %zu is not allowed "
                        "(allowed: A-Z a-z 0-9 . _ -)"),
                     what, valid, (gsize) (p - name) + 1);
        return FALSE;
      }
  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s '%s' is reserved"), what,
                   name);
      return FALSE;
    }
  return TRUE;
}

char *
vb_object_path_escape (const char *name)
{
  GString *s = g_string_sized_new (strlen (name) * 3 + 1);

  for (const guchar *p = (const guchar *) name; *p; p++)
    if (g_ascii_isalnum (*p))
      g_string_append_c (s, *p);
    else
      g_string_append_printf (s, "_%02x", *p);
  return g_string_free (s, FALSE);
}

char *
vb_object_path_unescape (const char *element)
{
  GString *s = g_string_sized_new (strlen (element) + 1);

  for (const char *p = element; *p; p++)
    {
      if (*p == '_' && g_ascii_isxdigit (p[1]) && g_ascii_isxdigit (p[2]))
        {
          g_string_append_c (
              s, (char) (g_ascii_xdigit_value (p[1]) << 4 | g_ascii_xdigit_value (p[2])));
          p += 2;
        }
      else
        g_string_append_c (s, *p);
    }
  return g_string_free (s, FALSE);
}

char *
vb_device_object_path (const char *name)
{
  g_autofree char *element = vb_object_path_escape (name);

  return g_strconcat (VB_OBJECT_ROOT "/devices/", element, NULL);
}

char *
vb_component_object_path (const char *name, guint index)
{
  g_autofree char *device = vb_device_object_path (name);

  return g_strdup_printf ("%s/components/%u", device, index);
}

char *
vb_shown (const char *text)
{
  gsize len = strlen (text);
  g_autofree char *valid = NULL;
  const char *cut;

  /* UTF-8 in any case: D-Bus carries no other error text (found by
   * fuzz-dbus: a long name of two-byte characters was cut in the middle
   * of one) */
  if (!g_utf8_validate (text, -1, NULL))
    text = valid = g_utf8_make_valid (text, -1);
  if (strlen (text) <= VB_SHOWN_MAX)
    return g_strdup (text);
  cut = text + VB_SHOWN_MAX - 24;
  while (cut > text && ((guchar) *cut & 0xc0) == 0x80)
    cut--; /* back to the start of the character cut */
  return g_strdup_printf ("%.*s... (%" G_GSIZE_FORMAT " bytes)", (int) (cut - text), text, len);
}

gboolean
vb_source_parse (const char *source, VbSourceKind *kind, char **device_name, GError **error)
{
  if (source == NULL || *source == '\0')
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("component: must not be empty"));
      return FALSE;
    }
  if (g_str_has_prefix (source, "vblk:"))
    {
      if (!vb_name_is_valid (source + 5, "component device name", error))
        return FALSE;
      *kind = VB_SOURCE_DEVICE;
      if (device_name)
        *device_name = g_strdup (source + 5);
      return TRUE;
    }
  if (g_str_has_prefix (source, "nbd://") || g_str_has_prefix (source, "nbd+unix://")
      || g_str_has_prefix (source, "nbds://") || g_str_has_prefix (source, "nbd+tcp://"))
    {
      *kind = VB_SOURCE_NBD;
      return TRUE;
    }
  if (source[0] != '/')
    {
      g_autofree char *shown = vb_shown (source);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': not an absolute path, vblk:NAME or an NBD URI"), shown);
      return FALSE;
    }
  if (strlen (source) >= PATH_MAX)
    {
      g_autofree char *shown = vb_shown (source);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': longer than a path can be (%d bytes)"), shown, PATH_MAX - 1);
      return FALSE;
    }
  *kind = VB_SOURCE_PATH;
  return TRUE;
}

char *
vb_uuid_new (void)
{
  return g_uuid_string_random ();
}

gboolean
vb_uuid_is_valid (const char *uuid)
{
  return uuid != NULL && g_uuid_string_is_valid (uuid);
}

guint
vb_uuid_hash (gconstpointer key)
{
  const char *s = key;
  size_t len = strlen (s);
  guint h = 5381;

  if (len < 16)
    return g_str_hash (s);
  for (guint i = 0; i < 8; i++)
    h = h * 33 + (guchar) s[i];
  for (size_t i = len - 8; i < len; i++)
    h = h * 33 + (guchar) s[i];
  return h;
}

int
vb_compare_string_pointers (const void *a, const void *b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}
