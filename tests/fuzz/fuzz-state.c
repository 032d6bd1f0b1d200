/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the readers of the desired state: state.json (and
 * reconfigure.json, the intent vblkd keeps beside it, which the same
 * vb_state_from_json reads) and the spec of Manager.Apply and vbmgr apply
 * (vb_spec_from_json). Any text must either load or fail with one
 * VB_ERROR_INVALID_ARGUMENT in UTF-8 that starts with the origin; a state
 * that loads must write out as JSON that loads again to equal devices and
 * the same text, and a spec must come out with its slots numbered.
 * Built for libFuzzer (clang) and for the standalone driver of
 * fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb-error.h"
#include "vb-state.h"


#define ORIGIN "state.json"

static void
check_error (const GError *error, const uint8_t *data, size_t size)
{
  FUZZ_CHECK (error != NULL && error->domain == VB_ERROR);
  FUZZ_CHECK (error->code == VB_ERROR_INVALID_ARGUMENT);
  /* Messages reach D-Bus callers, which take UTF-8 only. */
  FUZZ_CHECK (g_utf8_validate (error->message, -1, NULL));
  FUZZ_CHECK (g_str_has_prefix (error->message, ORIGIN ":"));
  FUZZ_CHECK (error->message[strlen (ORIGIN ":")] != '\0');
  /* Text that is not UTF-8 (a NUL included) is refused at its place
   * before json-glib sees it. */
  if (!g_utf8_validate_len ((const char *) data, size, NULL))
    FUZZ_CHECK (g_str_has_suffix (error->message, ": invalid UTF-8")
                || g_str_has_suffix (error->message, ": NUL byte in the text"));
}

static void
check_same_devices (const VbState *a, const VbState *b)
{
  FUZZ_CHECK (a->devices->len == b->devices->len);
  for (guint i = 0; i < a->devices->len; i++)
    FUZZ_CHECK (vb_device_config_equal (a->devices->pdata[i], b->devices->pdata[i]));
}

/* What a loaded state holds, whichever reader loaded it. */
static void
check_model (const VbState *state, gboolean spec)
{
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      guint slots = 0;
      gboolean past_slots = FALSE;

      FUZZ_CHECK (d->name != NULL && d->driver != NULL && d->backend != NULL);
      FUZZ_CHECK (spec || d->uuid != NULL);
      FUZZ_CHECK (vb_state_lookup (state, d->name) == d);
      FUZZ_CHECK (vb_state_index_of (state, d->name) == (gint) i);
      for (guint k = 0; k < d->components->len; k++)
        {
          const VbComponentConfig *c = d->components->pdata[k];

          FUZZ_CHECK (c->source != NULL && *c->source != '\0' && c->role != NULL);
          FUZZ_CHECK (spec || c->uuid != NULL);
          FUZZ_CHECK (!(c->faulty && !c->behind));
          if (!spec)
            continue;
          /* a spec's slots come first, numbered from 0 in order */
          if (vb_component_config_is_slot (c))
            {
              g_autofree char *expected = g_strdup_printf ("%u", slots++);

              FUZZ_CHECK (!past_slots && strcmp (c->role, expected) == 0);
            }
          else
            past_slots = TRUE;
        }
      if (spec)
        FUZZ_CHECK (vb_device_config_n_slots (d) == slots);
    }
}

/* Written out, @state must load again to the same devices and write out
 * to the same text: what vblkd saves it can read back (and a spec that
 * vbmgr dump printed, vbmgr apply takes unchanged). */
static void
check_round_trip (const VbState *state, gboolean spec)
{
  g_autofree char *text = (spec ? vb_spec_to_json : vb_state_to_json) (state);
  g_autofree char *again = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) back = NULL;
  g_autoptr (VbState) copy = vb_state_copy (state);

  FUZZ_CHECK (text != NULL && g_str_has_suffix (text, "}\n"));
  FUZZ_CHECK (g_utf8_validate (text, -1, NULL));
  back = (spec ? vb_spec_from_json : vb_state_from_json) (text, -1, ORIGIN, &error);
  if (back == NULL)
    fprintf (stderr, "fuzz-state: written %s does not load: %s\n", spec ? "spec" : "state",
             error->message);
  FUZZ_CHECK (back != NULL && error == NULL);
  check_same_devices (state, back);
  again = (spec ? vb_spec_to_json : vb_state_to_json) (back);
  FUZZ_CHECK (strcmp (text, again) == 0);
  check_same_devices (state, copy);
}

/* A spec names a device's UUID only when it wants one; written out it
 * names each, as the desired state gives them once applied. */
static gboolean
spec_has_uuids (const VbState *spec)
{
  for (guint i = 0; i < spec->devices->len; i++)
    {
      const VbDeviceConfig *d = spec->devices->pdata[i];

      if (d->uuid == NULL)
        return FALSE;
      for (guint k = 0; k < d->components->len; k++)
        if (((VbComponentConfig *) d->components->pdata[k])->uuid == NULL)
          return FALSE;
    }
  return TRUE;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *text = (const char *) data;

  /* The bytes as read from the file: not NUL-terminated, with a length. */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (VbState) state = vb_state_from_json (text, (gssize) size, ORIGIN, &error);

    if (state == NULL)
      check_error (error, data, size);
    else
      {
        FUZZ_CHECK (error == NULL);
        check_model (state, FALSE);
        check_round_trip (state, FALSE);
      }
  }
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (VbState) spec = vb_spec_from_json (text, (gssize) size, ORIGIN, &error);

    if (spec == NULL)
      check_error (error, data, size);
    else
      {
        FUZZ_CHECK (error == NULL);
        check_model (spec, TRUE);
        if (spec_has_uuids (spec))
          check_round_trip (spec, TRUE);
      }
  }
  return 0;
}

/* Seeds: states and specs using every key, in a few shapes. */

static const struct {
  const char *name;
  const char *text;
} seeds[] = {
  { "empty.json", "{\"version\": 1}\n" },
  { "two-devices.json",
    "{\n"
    "  \"version\" : 1,\n"
    "  \"devices\" : [\n"
    "    {\n"
    "      \"name\" : \"disk0\",\n"
    "      \"uuid\" : \"11111111-1111-4111-8111-111111111111\",\n"
    "      \"driver\" : \"file\",\n"
    "      \"backend\" : \"loop\",\n"
    "      \"attributes\" : { \"read_only\" : \"false\", \"sector_size\" : \"4096\" },\n"
    "      \"components\" : [\n"
    "        { \"source\" : \"/srv/a \\\"quoted\\\".img\", \"role\" : \"0\",\n"
    "          \"uuid\" : \"aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa\" }\n"
    "      ],\n"
    "      \"exports\" : [],\n"
    "      \"autostart\" : true,\n"
    "      \"started\" : true\n"
    "    },\n"
    "    {\n"
    "      \"name\" : \"data\",\n"
    "      \"uuid\" : \"22222222-2222-4222-8222-222222222222\",\n"
    "      \"driver\" : \"window\",\n"
    "      \"attributes\" : { \"offset\" : \"1048576\" },\n"
    "      \"components\" : [\n"
    "        { \"source\" : \"vblk:disk0\", \"role\" : \"0\",\n"
    "          \"uuid\" : \"bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb\" }\n"
    "      ],\n"
    "      \"exports\" : [ \"nbd unix:/run/vblk/data.sock\" ],\n"
    "      \"autostart\" : false\n"
    "    }\n"
    "  ]\n"
    "}\n" },
  /* a mirror being rebuilt onto a spare, one leg failed: what
   * reconfigure.json holds too (one device) */
  { "raid1-rebuilding.json",
    "{\"version\":1,\"devices\":[{\"name\":\"mirror\","
    "\"uuid\":\"33333333-3333-4333-8333-333333333333\",\"driver\":\"raid1\","
    "\"backend\":\"auto\",\"attributes\":{\"metadata\":\"none\",\"bitmap\":\"none\"},"
    "\"components\":["
    "{\"source\":\"/dev/sdb\",\"role\":\"0\",\"uuid\":\"c0c0c0c0-0000-4000-8000-000000000001\"},"
    "{\"source\":\"nbd+unix:///x?socket=/run/x.sock\",\"role\":\"1\","
    "\"uuid\":\"c0c0c0c0-0000-4000-8000-000000000002\",\"in_sync\":false},"
    "{\"source\":\"/dev/sdd\",\"role\":\"faulty\","
    "\"uuid\":\"c0c0c0c0-0000-4000-8000-000000000003\",\"in_sync\":false,\"faulty\":true},"
    "{\"source\":\"/dev/sde\",\"role\":\"spare\","
    "\"uuid\":\"c0c0c0c0-0000-4000-8000-000000000004\"}],"
    "\"exports\":[\"nbd tcp::10809\"],\"autostart\":true,\"started\":false}]}" },
  /* a spec as vbmgr apply takes it: sources alone, roles and UUIDs left out,
   * attribute values as numbers and booleans */
  { "spec-short.json", "{ \"version\": 1, \"devices\": [\n"
                       "  { \"name\": \"fast\", \"driver\": \"raid0\",\n"
                       "    \"attributes\": { \"chunk_size\": 65536, \"read_only\": false },\n"
                       "    \"components\": [ \"/dev/nvme0n1\", \"/dev/nvme1n1\",\n"
                       "      { \"source\": \"/dev/sdz\", \"role\": \"spare\" } ] },\n"
                       "  { \"name\": \"top\", \"driver\": \"linear\", \"started\": false,\n"
                       "    \"components\": [ { \"source\": \"vblk:fast\", \"role\": \"0\" } ] }\n"
                       "] }\n" },
  /* a spec as vbmgr dump prints it: every UUID named */
  { "spec-dump.json",
    "{\"version\":1,\"devices\":[{\"name\":\"data.1\","
    "\"uuid\":\"44444444-4444-4444-8444-444444444444\",\"driver\":\"raid10\","
    "\"backend\":\"ublk\",\"attributes\":{\"copies\":\"2\",\"layout\":\"near\"},"
    "\"components\":["
    "{\"source\":\"/a.img\",\"role\":\"0\",\"uuid\":\"d0d0d0d0-0000-4000-8000-000000000001\"},"
    "{\"source\":\"/b.img\",\"role\":\"1\",\"uuid\":\"d0d0d0d0-0000-4000-8000-000000000002\"}],"
    "\"exports\":[],\"autostart\":true,\"started\":true}]}\n" },
};

int
vb_fuzz_write_seeds (const char *dir)
{
  for (guint i = 0; i < G_N_ELEMENTS (seeds); i++)
    {
      g_autofree char *path = g_build_filename (dir, seeds[i].name, NULL);
      g_autoptr (GError) error = NULL;
      g_autoptr (VbState) state = vb_state_from_json (seeds[i].text, -1, path, &error);

      /* every seed loads as a state or as a spec */
      if (state == NULL)
        {
          g_clear_error (&error);
          state = vb_spec_from_json (seeds[i].text, -1, path, &error);
        }
      if (state == NULL)
        {
          fprintf (stderr, "seed %s is not valid: %s\n", seeds[i].name, error->message);
          return 1;
        }
      if (!g_file_set_contents (path, seeds[i].text, -1, &error))
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
    }
  return 0;
}
