/*
 * A stand-in for libnvidia-ml.so.1 with only the NVML calls anvil-ledger makes, for tests on
 * machines without an NVIDIA driver. The real pynvml bindings load it by its soname.
 *
 * The cards come from the text file named by ANVIL_NVML_SHIM_CONFIG, read again at every
 * nvmlInit so that one process can see several scenarios:
 *
 *   init_error 9                       (optional: nvmlInit fails with this NVML code)
 *   driver 550.54.15
 *   card name=NVIDIA H200 uuid=GPU-... total_mib=143771 used_mib=1000,2000 temp_c=41
 *        power_mw=120000 limit_mw=700000 sm_mhz=1980 reasons=0x4 unsupported=power,temp
 *        reserved_mib=615 no_v2=1
 *
 * (one `card` line per card, all on one line). used_mib may list several values: each
 * memory query on that card takes the next, cycling across nvmlInit calls, so a sampler sees
 * the memory move. A value may have a fraction (used_mib=140084.3): a real card's memory is
 * counted in bytes, never in whole MiB. Names in `unsupported` make those queries return NOT_SUPPORTED.
 *
 * Memory as a driver reports it: used_mib is what processes hold, reserved_mib what the
 * driver keeps for itself, free the rest. The v2 query (nvmlDeviceGetMemoryInfo_v2) gives the
 * four apart, as nvidia-smi shows them; the v1 query counts reserved memory as used. no_v2
 * plays a driver that cannot answer the v2 query: 1 predates it (FUNCTION_NOT_FOUND, as
 * pynvml reports a missing symbol), 2 knows another version of its structure
 * (ARGUMENT_VERSION_MISMATCH), 3 does not support it on this card (NOT_SUPPORTED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_CARDS 16
#define MAX_STEPS 64
#define MIB 1048576ULL

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

#define NVML_MEMORY_V2 (unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24U))

typedef struct card {
    unsigned index;
    char name[96];
    char uuid[96];
    unsigned long long total_mib, reserved_mib;
    int no_v2;
    unsigned long long used_bytes[MAX_STEPS];
    unsigned steps;
    unsigned temp_c, power_mw, limit_mw, sm_mhz;
    unsigned long long reasons;
    char unsupported[128];
} card_t;

typedef card_t *nvmlDevice_t;

static card_t cards[MAX_CARDS];
static unsigned long long memory_calls[MAX_CARDS]; /* kept across nvmlInit: the cycle goes on */
static unsigned card_count;
static char driver[80] = "000.00";
static int initialized;

static void field(const char *line, const char *key, char *out, size_t size)
{
    /* Values end at the next " key=" (names hold spaces) or at the end of the line. */
    char pattern[40];
    snprintf(pattern, sizeof pattern, "%s=", key);
    const char *at = strstr(line, pattern);
    out[0] = '\0';
    if (at == NULL || (at != line && at[-1] != ' '))
        return;
    at += strlen(pattern);
    const char *end = at;
    while (*end && *end != '\n') {
        if (*end == ' ') {
            const char *next = end + 1;
            while (*next && *next != ' ' && *next != '=')
                next++;
            if (*next == '=')
                break;
        }
        end++;
    }
    size_t n = (size_t)(end - at) < size - 1 ? (size_t)(end - at) : size - 1;
    memcpy(out, at, n);
    out[n] = '\0';
}

static unsigned long long number(const char *line, const char *key)
{
    char value[64];
    field(line, key, value, sizeof value);
    return strtoull(value, NULL, 0);
}

static int load(void)
{
    const char *path = getenv("ANVIL_NVML_SHIM_CONFIG");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[1024];
    int init_error = 0;
    card_count = 0;
    if (f == NULL)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "init_error ", 11) == 0) {
            init_error = atoi(line + 11);
        } else if (strncmp(line, "driver ", 7) == 0) {
            snprintf(driver, sizeof driver, "%.79s", line + 7);
            driver[strcspn(driver, "\n")] = '\0';
        } else if (strncmp(line, "card ", 5) == 0 && card_count < MAX_CARDS) {
            card_t *c = &cards[card_count];
            char used[512];
            memset(c, 0, sizeof *c);
            c->index = card_count;
            field(line, "name", c->name, sizeof c->name);
            field(line, "uuid", c->uuid, sizeof c->uuid);
            field(line, "unsupported", c->unsupported, sizeof c->unsupported);
            c->total_mib = number(line, "total_mib");
            c->reserved_mib = number(line, "reserved_mib");
            c->no_v2 = (int)number(line, "no_v2");
            c->temp_c = (unsigned)number(line, "temp_c");
            c->power_mw = (unsigned)number(line, "power_mw");
            c->limit_mw = (unsigned)number(line, "limit_mw");
            c->sm_mhz = (unsigned)number(line, "sm_mhz");
            c->reasons = number(line, "reasons");
            field(line, "used_mib", used, sizeof used);
            for (char *p = strtok(used, ","); p && c->steps < MAX_STEPS; p = strtok(NULL, ","))
                c->used_bytes[c->steps++] = (unsigned long long)(strtod(p, NULL) * MIB);
            if (c->steps == 0)
                c->used_bytes[c->steps++] = 0;
            card_count++;
        }
    }
    fclose(f);
    return init_error;
}

static int unsupported(nvmlDevice_t device, const char *what)
{
    char list[130];
    char needle[40];
    snprintf(list, sizeof list, ",%s,", device->unsupported);
    snprintf(needle, sizeof needle, ",%s,", what);
    return strstr(list, needle) != NULL;
}

#define CHECK(device)                                                                          \
    do {                                                                                       \
        if (!initialized)                                                                      \
            return NVML_ERROR_UNINITIALIZED;                                                   \
        if ((device) == NULL || (device) < cards || (device) >= cards + card_count)            \
            return NVML_ERROR_INVALID_ARGUMENT;                                                \
    } while (0)

static nvmlReturn_t copy(const char *value, char *out, unsigned length)
{
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    int error = load();
    initialized = error == 0;
    return error;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    initialized = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    return copy(driver, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    *count = card_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= card_count || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &cards[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    CHECK(device);
    *index = device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    CHECK(device);
    return copy(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    CHECK(device);
    return copy(device->uuid, uuid, length);
}

static void memory_now(nvmlDevice_t device, nvmlMemory_v2_t *out)
{
    unsigned long long used = device->used_bytes[memory_calls[device->index]++ % device->steps];
    unsigned long long reserved = device->reserved_mib * MIB;
    out->total = device->total_mib * MIB;
    out->reserved = reserved;
    out->used = used;
    out->free = out->total > used + reserved ? out->total - used - reserved : 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    CHECK(device);
    if (unsupported(device, "memory"))
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlMemory_v2_t now;
    memory_now(device, &now);
    memory->total = now.total;
    memory->used = now.used + now.reserved;
    memory->free = now.free;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    CHECK(device);
    if (device->no_v2 == 1)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (device->no_v2 == 2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (device->no_v2 == 3)
        return NVML_ERROR_NOT_SUPPORTED;
    if (unsupported(device, "memory"))
        return NVML_ERROR_NOT_SUPPORTED;
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != NVML_MEMORY_V2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory_now(device, memory);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
    CHECK(device);
    if (sensor != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (unsupported(device, "temp"))
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = device->temp_c;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *milliwatts)
{
    CHECK(device);
    if (unsupported(device, "power"))
        return NVML_ERROR_NOT_SUPPORTED;
    *milliwatts = device->power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *milliwatts)
{
    CHECK(device);
    if (unsupported(device, "power"))
        return NVML_ERROR_NOT_SUPPORTED;
    *milliwatts = device->limit_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *mhz)
{
    CHECK(device);
    if (type != 1) /* NVML_CLOCK_SM */
        return NVML_ERROR_INVALID_ARGUMENT;
    if (unsupported(device, "clock"))
        return NVML_ERROR_NOT_SUPPORTED;
    *mhz = device->sm_mhz;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons)
{
    CHECK(device);
    if (unsupported(device, "reasons"))
        return NVML_ERROR_NOT_SUPPORTED;
    *reasons = device->reasons;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}
