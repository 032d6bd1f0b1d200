/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writing the desired state (see vb-state.h): the canonical JSON of
 * state.json, and loading and saving the file durably (a state that would
 * not load again is never written). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-state.h"
#include "vb-state-record.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "vb-error.h"

/* ------------------------------------------------------------------ */
/* Writing                                                              */

/* @spec: without what vblkd records of its components' copies (in_sync,
 * faulty), which a spec does not ask for */
static void
build_device (JsonBuilder *b, const VbDeviceConfig *d, gboolean spec)
{
  g_autoptr (GList) keys = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, d->name);
  json_builder_set_member_name (b, "uuid");
  json_builder_add_string_value (b, d->uuid);
  json_builder_set_member_name (b, "driver");
  json_builder_add_string_value (b, d->driver);
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, d->backend);

  json_builder_set_member_name (b, "attributes");
  json_builder_begin_object (b);
  keys = g_list_sort (g_hash_table_get_keys (d->attributes), (GCompareFunc) g_strcmp0);
  for (GList *l = keys; l; l = l->next)
    {
      const char *key = l->data;

      json_builder_set_member_name (b, key);
      json_builder_add_string_value (b, g_hash_table_lookup (d->attributes, key));
    }
  json_builder_end_object (b);

  json_builder_set_member_name (b, "components");
  json_builder_begin_array (b);
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "source");
      json_builder_add_string_value (b, c->source);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, c->role);
      json_builder_set_member_name (b, "uuid");
      json_builder_add_string_value (b, c->uuid);
      if (c->behind && !spec)
        {
          json_builder_set_member_name (b, "in_sync");
          json_builder_add_boolean_value (b, FALSE);
        }
      if (c->faulty && !spec)
        {
          json_builder_set_member_name (b, "faulty");
          json_builder_add_boolean_value (b, TRUE);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "exports");
  json_builder_begin_array (b);
  for (guint i = 0; i < d->exports->len; i++)
    json_builder_add_string_value (b, d->exports->pdata[i]);
  json_builder_end_array (b);

  json_builder_set_member_name (b, "autostart");
  json_builder_add_boolean_value (b, d->autostart);
  json_builder_set_member_name (b, "started");
  json_builder_add_boolean_value (b, d->started);
  json_builder_end_object (b);
}

/* @deletes: a journal record's deleted names (NULL: none, no key) */
static char *
to_json (const VbState *state, gboolean spec, gboolean pretty, GPtrArray *deletes)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  g_return_val_if_fail (state != NULL, NULL);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, VB_STATE_VERSION);
  if (deletes)
    {
      json_builder_set_member_name (b, "delete");
      json_builder_begin_array (b);
      for (guint i = 0; i < deletes->len; i++)
        json_builder_add_string_value (b, deletes->pdata[i]);
      json_builder_end_array (b);
    }
  json_builder_set_member_name (b, "devices");
  json_builder_begin_array (b);
  for (guint i = 0; i < state->devices->len; i++)
    build_device (b, state->devices->pdata[i], spec);
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, pretty);
  json_generator_set_indent (gen, pretty ? 2 : 0);
  text = json_generator_to_data (gen, NULL);
  return pretty ? g_strconcat (text, "\n", NULL) : g_steal_pointer (&text);
}

char *
vb_state_to_json (const VbState *state)
{
  return to_json (state, FALSE, TRUE, NULL);
}

char *
vb_spec_to_json (const VbState *state)
{
  return to_json (state, TRUE, TRUE, NULL);
}

char *
vb_state_record_to_json (const VbState *puts, GPtrArray *deletes)
{
  g_return_val_if_fail (deletes != NULL, NULL);
  return to_json (puts, FALSE, FALSE, deletes);
}

/* ------------------------------------------------------------------ */
/* Files                                                                */

VbState *
vb_state_load (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local = NULL;
  gsize length = 0;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_file_get_contents (path, &text, &length, &local))
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return vb_state_new ();
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", path, local->message);
      return NULL;
    }
  return vb_state_from_json (text, (gssize) length, path, error);
}

gboolean
vb_state_fsync_directory (const char *dir, GError **error)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    {
      int saved = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", dir, g_strerror (saved));
      return FALSE;
    }
  if (fsync (fd) < 0)
    {
      int saved = errno;

      close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: fsync: %s"), dir, g_strerror (saved));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

char *
vb_state_checked_json (const VbState *state, const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (VbState) back = NULL;

  g_return_val_if_fail (state != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  text = vb_state_to_json (state);
  /* what a later vblkd would refuse to load is never written: the change
   * that led to it is refused instead (the old file stays) */
  back = vb_state_from_json (text, -1, "the state to save", &local);
  if (back == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s: not saved, it would not load again: %s"), path, local->message);
      return NULL;
    }
  return g_steal_pointer (&text);
}

gboolean
vb_state_write_text (const char *path, const char *text, GError **error)
{
  g_autofree char *dir = NULL;
  g_autoptr (GError) local = NULL;

  /* CONSISTENT|DURABLE: temp file in the same directory, fsync, rename. */
  if (!g_file_set_contents_full (path, text, -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0600,
                                 &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", path, local->message);
      return FALSE;
    }
  /* Not every GLib version fsyncs the directory after the rename; doing it
   * here makes the rename durable whatever the version. */
  dir = g_path_get_dirname (path);
  if (!vb_state_fsync_directory (dir, error))
    {
      g_prefix_error (error, "%s: ", path);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_state_save (const VbState *state, const char *path, GError **error)
{
  g_autofree char *text = NULL;

  g_return_val_if_fail (state != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  text = vb_state_checked_json (state, path, error);
  return text != NULL && vb_state_write_text (path, text, error);
}
