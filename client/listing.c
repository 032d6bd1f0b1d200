/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The shape every listing command of vbmgr shares (list, jobs): "--json"
 * or a table with a header, one row or one JSON object per item, read from
 * vblkd's ObjectManager; and the table and row helpers `show` uses too. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <stdarg.h>
#include <string.h>

const char *
vb_mgr_str (const char *s)
{
  return s != NULL ? s : "";
}

const char *
vb_mgr_or_dash (const char *s)
{
  return s != NULL && *s != '\0' ? s : "-";
}

char **
vb_mgr_row (const char *first, ...)
{
  GPtrArray *cells = g_ptr_array_new ();
  va_list args;

  va_start (args, first);
  for (const char *s = first; s != NULL; s = va_arg (args, const char *))
    g_ptr_array_add (cells, g_strdup (s));
  va_end (args);
  g_ptr_array_add (cells, NULL);
  return (char **) g_ptr_array_free (cells, FALSE);
}

void
vb_mgr_print_table (GPtrArray *rows, guint columns, const char *indent)
{
  g_autofree gsize *width = g_new0 (gsize, columns);

  for (guint r = 0; r < rows->len; r++)
    {
      char **row = rows->pdata[r];

      for (guint c = 0; c < columns; c++)
        width[c] = MAX (width[c], (gsize) g_utf8_strlen (row[c], -1));
    }
  for (guint r = 0; r < rows->len; r++)
    {
      char **row = rows->pdata[r];
      g_autoptr (GString) line = g_string_new (indent);

      for (guint c = 0; c < columns; c++)
        {
          g_string_append (line, row[c]);
          if (c + 1 < columns)
            for (gsize pad = g_utf8_strlen (row[c], -1); pad <= width[c]; pad++)
              g_string_append_c (line, ' ');
        }
      /* (no blanks after an empty last cell) */
      while (line->len > 0 && line->str[line->len - 1] == ' ')
        g_string_truncate (line, line->len - 1);
      g_print ("%s\n", line->str);
    }
}

static void
vb_mgr_print_listing_table (const VbMgrListing *listing, GDBusObjectManager *manager,
                            GPtrArray *items)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  guint columns = g_strv_length ((char **) listing->header);
  char **header = g_new0 (char *, columns + 1);

  /* the header is marked N_ () where the listing is declared */
  for (guint c = 0; c < columns; c++)
    header[c] = g_strdup (_ (listing->header[c]));
  g_ptr_array_add (rows, header);
  for (guint i = 0; i < items->len; i++)
    g_ptr_array_add (rows, listing->row (manager, items->pdata[i]));
  vb_mgr_print_table (rows, columns, "");
}

int
vb_mgr_run_listing (const VbMgrListing *listing, int argc, char **argv)
{
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (GPtrArray) items = NULL;

  if (!vb_mgr_parse_options (listing->command, "", _ (listing->summary), entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 1)
    return vb_mgr_usage_error (listing->command, _ ("unexpected argument '%s'"), argv[1]);

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  items = listing->collect (manager);
  if (json)
    vb_mgr_print_json_list (manager, items, listing->to_json);
  else
    vb_mgr_print_listing_table (listing, manager, items);
  return VB_EXIT_OK;
}

void
vb_mgr_component_view_free (VbMgrComponentView *view)
{
  g_free (view->source);
  g_free (view->role);
  g_free (view->state);
  g_free (view);
}

GPtrArray *
vb_mgr_collect_components (GDBusObjectManager *manager, VbDBusDevice *device)
{
  GPtrArray *views = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_mgr_component_view_free);
  const char *const *paths = vb_dbus_device_get_components (device);

  for (gsize i = 0; paths != NULL && paths[i] != NULL; i++)
    {
      g_autoptr (VbDBusComponent) component = NULL;
      VbMgrComponentView *view;
      const char *slash = strrchr (paths[i], '/');

      component = vb_mgr_lookup_component (manager, paths[i]);
      if (component == NULL)
        continue; /* removed while we were reading */
      view = g_new0 (VbMgrComponentView, 1);
      if (slash == NULL
          || !g_ascii_string_to_unsigned (slash + 1, 10, 0, G_MAXUINT, &view->index, NULL))
        view->index = i;
      view->source = g_strdup (vb_dbus_component_get_source (component));
      view->role = g_strdup (vb_dbus_component_get_role (component));
      view->state = g_strdup (vb_dbus_component_get_state (component));
      view->errors = vb_dbus_component_get_errors (component);
      g_ptr_array_add (views, view);
    }
  return views;
}
