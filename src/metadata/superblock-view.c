/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Views of a superblock for people and scripts: the mdadm --examine-like
 * text and the JSON of `vbmgr examine`. */
#include "config.h"

#include "superblock.h"

#include <string.h>

static char *
format_time (guint64 usec)
{
  g_autoptr (GDateTime) dt = NULL;

  if (usec <= (guint64) G_MAXINT64)
    dt = g_date_time_new_from_unix_utc ((gint64) (usec / G_USEC_PER_SEC));
  if (dt == NULL)
    return g_strdup_printf ("%" G_GUINT64_FORMAT " µs", usec);
  return g_date_time_format (dt, "%Y-%m-%d %H:%M:%S UTC");
}

static char *
format_bytes (guint64 bytes)
{
  g_autofree char *human = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);

  return g_strdup_printf ("%" G_GUINT64_FORMAT " (%s)", bytes, human);
}

static char *
format_features (guint32 features)
{
  GString *s = g_string_new (NULL);

  if (features & VB_SB_FEATURE_BITMAP)
    g_string_append (s, "bitmap");
  if (features & VB_SB_FEATURE_EVENTS_CLEARED)
    g_string_append_printf (s, "%sevents_cleared", s->len ? ", " : "");
  return g_string_free (s->len ? s : g_string_append (s, "none"), FALSE);
}

char *
vb_superblock_to_text (const VbSuperblock *sb)
{
  GString *s;
  g_autofree char *ctime = NULL;
  g_autofree char *utime = NULL;
  g_autofree char *data_offset = NULL;
  g_autofree char *data_size = NULL;
  g_auto (GStrv) attributes = NULL;
  g_autofree char *features = NULL;
  guint n_roles;

  g_return_val_if_fail (sb != NULL, NULL);

  s = g_string_new (NULL);
  features = format_features (sb->features);
  ctime = format_time (sb->ctime);
  utime = format_time (sb->utime);
  data_offset = format_bytes (sb->data_offset);
  data_size = format_bytes (sb->data_size);
  g_string_append_printf (s, "%16s : %s\n", "Format", sb->format[0] ? sb->format : "vblk");
  g_string_append_printf (s, "%16s : %u\n", "Version", sb->version);
  g_string_append_printf (s, "%16s : %s\n", "Features", features);
  g_string_append_printf (s, "%16s : %s\n", "Device UUID", sb->device_uuid);
  g_string_append_printf (s, "%16s : %s\n", "Device Name", sb->device_name);
  g_string_append_printf (s, "%16s : %s\n", "Component UUID", sb->component_uuid);
  if (sb->role == VB_SB_ROLE_SPARE)
    g_string_append_printf (s, "%16s : spare\n", "Role");
  else
    g_string_append_printf (s, "%16s : %d\n", "Role", sb->role);
  g_string_append_printf (s, "%16s : %s\n", "Driver", sb->driver);
  attributes = g_strsplit (sb->attributes, "\n", -1);
  for (guint i = 0, shown = 0; attributes[i] != NULL; i++)
    {
      if (*attributes[i] == '\0')
        continue;
      g_string_append_printf (s, "%16s %s %s\n", shown == 0 ? "Attributes" : "",
                              shown == 0 ? ":" : " ", attributes[i]);
      shown++;
    }
  g_string_append_printf (s, "%16s : %" G_GUINT64_FORMAT "\n", "Events", sb->events);
  if (sb->features & VB_SB_FEATURE_EVENTS_CLEARED)
    g_string_append_printf (s, "%16s : %" G_GUINT64_FORMAT "\n", "Events Cleared",
                            sb->events_cleared);
  else
    g_string_append_printf (s, "%16s : %s\n", "Events Cleared", "not recorded");
  g_string_append_printf (s, "%16s : %s\n", "State", sb->clean ? "clean" : "active");
  g_string_append_printf (s, "%16s : %s\n", "Creation Time", ctime);
  g_string_append_printf (s, "%16s : %s\n", "Update Time", utime);
  g_string_append_printf (s, "%16s : %s\n", "Data Offset", data_offset);
  g_string_append_printf (s, "%16s : %s\n", "Data Size", data_size);
  if (sb->bitmap_chunk != 0 || sb->bitmap_bytes != 0)
    {
      g_autofree char *chunk = format_bytes (sb->bitmap_chunk);

      g_string_append_printf (s, "%16s : %s\n", "Bitmap Chunk", chunk);
      g_string_append_printf (s, "%16s : %u at offset %d\n", "Bitmap Bytes", sb->bitmap_bytes,
                              VB_BITMAP_OFFSET);
    }
  if (sb->rebuild_offset != 0)
    {
      g_autofree char *rebuild = format_bytes (sb->rebuild_offset);

      g_string_append_printf (s, "%16s : %s\n", "Rebuild Offset", rebuild);
    }
  n_roles = MIN (sb->n_roles, VB_SB_MAX_ROLES);
  g_string_append_printf (s, "%16s : %u\n", "Roles", sb->n_roles);
  for (guint i = 0; i < n_roles; i++)
    g_string_append_printf (s, "%16s   %-3u %-10s %s%s\n", "", i,
                            vb_role_state_to_string (sb->roles[i].state),
                            *sb->roles[i].uuid != '\0' ? sb->roles[i].uuid : "-",
                            (gint32) i == sb->role ? "  (this component)" : "");
  return g_string_free (s, FALSE);
}

static void
add_uint (JsonBuilder *b, const char *member, guint64 value)
{
  json_builder_set_member_name (b, member);
  /* JSON numbers here are gint64; nothing real reaches 2^63. */
  json_builder_add_int_value (b, (gint64) MIN (value, (guint64) G_MAXINT64));
}

static void
add_string (JsonBuilder *b, const char *member, const char *value)
{
  json_builder_set_member_name (b, member);
  json_builder_add_string_value (b, value);
}

JsonNode *
vb_superblock_to_json (const VbSuperblock *sb)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_auto (GStrv) lines = NULL;
  guint n_roles;

  g_return_val_if_fail (sb != NULL, NULL);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, sb->format[0] ? sb->format : "vblk");
  add_uint (b, "version", sb->version);
  json_builder_set_member_name (b, "features");
  json_builder_begin_array (b);
  if (sb->features & VB_SB_FEATURE_BITMAP)
    json_builder_add_string_value (b, "bitmap");
  if (sb->features & VB_SB_FEATURE_EVENTS_CLEARED)
    json_builder_add_string_value (b, "events_cleared");
  json_builder_end_array (b);
  add_string (b, "device_uuid", sb->device_uuid);
  add_string (b, "device_name", sb->device_name);
  add_string (b, "component_uuid", sb->component_uuid);
  json_builder_set_member_name (b, "role");
  json_builder_add_int_value (b, sb->role);
  json_builder_set_member_name (b, "spare");
  json_builder_add_boolean_value (b, sb->role == VB_SB_ROLE_SPARE);
  add_string (b, "driver", sb->driver);
  json_builder_set_member_name (b, "attributes");
  json_builder_begin_object (b);
  lines = g_strsplit (sb->attributes, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      char *eq = strchr (lines[i], '=');

      if (eq == NULL)
        continue;
      *eq = '\0';
      add_string (b, lines[i], eq + 1);
    }
  json_builder_end_object (b);
  add_uint (b, "events", sb->events);
  /* null: written before it was recorded */
  json_builder_set_member_name (b, "events_cleared");
  if (sb->features & VB_SB_FEATURE_EVENTS_CLEARED)
    json_builder_add_int_value (b, (gint64) MIN (sb->events_cleared, (guint64) G_MAXINT64));
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "clean");
  json_builder_add_boolean_value (b, sb->clean);
  add_uint (b, "ctime", sb->ctime);
  add_uint (b, "utime", sb->utime);
  add_uint (b, "data_offset", sb->data_offset);
  add_uint (b, "data_size", sb->data_size);
  add_uint (b, "bitmap_chunk", sb->bitmap_chunk);
  add_uint (b, "bitmap_bytes", sb->bitmap_bytes);
  add_uint (b, "rebuild_offset", sb->rebuild_offset);
  add_uint (b, "n_roles", sb->n_roles);
  json_builder_set_member_name (b, "roles");
  json_builder_begin_array (b);
  n_roles = MIN (sb->n_roles, VB_SB_MAX_ROLES);
  for (guint i = 0; i < n_roles; i++)
    {
      json_builder_begin_object (b);
      add_uint (b, "slot", i);
      json_builder_set_member_name (b, "uuid");
      if (*sb->roles[i].uuid != '\0')
        json_builder_add_string_value (b, sb->roles[i].uuid);
      else
        json_builder_add_null_value (b);
      add_string (b, "state", vb_role_state_to_string (sb->roles[i].state));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
