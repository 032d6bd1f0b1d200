/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-options.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-error.h"
#include "vb-options.h"

#include <string.h>

gboolean
vb_options_check (GVariant *options, const char *const *allowed, GError **error)
{
  GVariantIter iter;
  const char *key;
  GVariant *value;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      gboolean known = FALSE;
      for (guint i = 0; allowed && allowed[i]; i++)
        {
          const char *colon = strchr (allowed[i], ':');
          if (strncmp (allowed[i], key, colon - allowed[i]) != 0 || key[colon - allowed[i]] != '\0')
            continue;
          known = TRUE;
          if (strcmp (g_variant_get_type_string (value), colon + 1) != 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                           _ ("option '%s': expected type '%s', got '%s'"), key, colon + 1,
                           g_variant_get_type_string (value));
              g_variant_unref (value);
              return FALSE;
            }
        }
      g_variant_unref (value);
      if (!known)
        {
          g_autofree char *list = g_strjoinv (", ", (char **) allowed);
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("option '%s': unknown (known: %s)"), key, *list ? list : "none");
          return FALSE;
        }
    }
  return TRUE;
}

GHashTable *
vb_attributes_from_variant (GVariant *attributes)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GVariantIter iter;
  const char *k, *v;

  g_variant_iter_init (&iter, attributes);
  while (g_variant_iter_next (&iter, "{&s&s}", &k, &v))
    g_hash_table_insert (h, g_strdup (k), g_strdup (v));
  return h;
}

gboolean
vb_options_get_bool (GVariant *options, const char *key, gboolean fallback)
{
  gboolean value;

  if (options && g_variant_lookup (options, key, "b", &value))
    return value;
  return fallback;
}

gboolean
vb_export_spec_parse (const char *spec, char **address, GError **error)
{
  const char *addr;

  if (!g_str_has_prefix (spec, "nbd "))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export '%s': only 'nbd ADDRESS' is known"), spec);
      return FALSE;
    }
  addr = spec + 4;
  if (g_str_has_prefix (addr, "unix:/") && strlen (addr) < 5 + 108)
    ;
  else if (g_str_has_prefix (addr, "tcp:") && strrchr (addr + 4, ':') != NULL)
    {
      const char *port = strrchr (addr + 4, ':') + 1;
      guint64 p = 0;
      if (!g_ascii_string_to_unsigned (port, 10, 1, 65535, &p, NULL) || port - 1 == addr + 4)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
              _ ("export '%s': listen address needs tcp:HOST:PORT with a port from 1 to 65535"),
              addr);
          return FALSE;
        }
    }
  else
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
          _ ("listen '%s': expected unix:/ABSOLUTE/PATH (under 108 bytes) or tcp:HOST:PORT"), addr);
      return FALSE;
    }
  if (address)
    *address = g_strdup (addr);
  return TRUE;
}
