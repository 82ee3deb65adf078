/* Times one SavedModel signature through TensorFlow's C API (TF_LoadSessionFromSavedModel, TF_SessionRun):
 * the graph run the way TF Serving runs it, by Session::Run from C++, with no Python on the call path.
 *
 * usage: session_run EXPORT_DIR CONFIG_HEX FETCH N_FEEDS (FEED DTYPE COLUMNS FILE){N_FEEDS}
 *   FETCH, FEED: graph tensors "op:index" (the signature's tensor names); DTYPE: f32, i64 or str;
 *   COLUMNS: row width of a 2-D input (0: an empty [batch, 0] input, as a model without dense features gets),
 *   -1 for a 1-D one (str feeds are always 1-D); FILE: the rows of the largest batch (f32/i64: the raw
 *   row-major values; str: per row a native uint32 length, then the bytes); CONFIG_HEX: a serialized
 *   ConfigProto (thread pools), hex-encoded. As many feeds as the signature has inputs, of any of these dtypes.
 * Then, per line on stdin, "BATCH SECONDS MIN_CALLS": 3 warm-up calls on the first BATCH rows, then calls
 * for at least SECONDS and MIN_CALLS; prints the milliseconds of each timed call on one line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/tf_tstring.h"

#define MAX_FEEDS 8

typedef struct {
  TF_Output port;
  TF_DataType dtype;
  long columns, rows, size;
  unsigned char *data;
} Feed;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void check(TF_Status *status, const char *what) {
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "%s: %s\n", what, TF_Message(status));
    exit(2);
  }
}

static TF_Output port(TF_Graph *graph, const char *spec) {
  char name[512];
  int index = 0;
  if (sscanf(spec, "%511[^:]:%d", name, &index) < 1) exit(2);
  TF_Output out = {TF_GraphOperationByName(graph, name), index};
  if (!out.oper) {
    fprintf(stderr, "the graph has no op %s\n", name);
    exit(2);
  }
  return out;
}

static void read_rows(Feed *feed, const char *path) {
  FILE *file = fopen(path, "rb");
  if (!file) {
    perror(path);
    exit(2);
  }
  fseek(file, 0, SEEK_END);
  feed->size = ftell(file);
  fseek(file, 0, SEEK_SET);
  feed->data = malloc(feed->size ? feed->size : 1);
  if (fread(feed->data, 1, feed->size, file) != (size_t)feed->size) exit(2);
  fclose(file);
}

static void too_few_rows(const Feed *feed, long batch) {
  fprintf(stderr, "feed %s holds fewer than %ld rows: write the largest batch's rows to its file\n",
          TF_OperationName(feed->port.oper), batch);
  exit(2);
}

/* The first `batch` rows of a feed as a tensor. */
static TF_Tensor *batch_tensor(const Feed *feed, long batch) {
  int64_t dims[2] = {batch, feed->columns};
  int rank = feed->columns >= 0 ? 2 : 1;
  if (feed->dtype != TF_STRING) {
    size_t bytes = (size_t)batch * (feed->columns >= 0 ? feed->columns : 1) * TF_DataTypeSize(feed->dtype);
    if (bytes > (size_t)feed->size) too_few_rows(feed, batch);
    TF_Tensor *tensor = TF_AllocateTensor(feed->dtype, dims, rank, bytes);
    if (bytes) memcpy(TF_TensorData(tensor), feed->data, bytes);
    return tensor;
  }
  TF_Tensor *tensor = TF_AllocateTensor(TF_STRING, dims, 1, sizeof(TF_TString) * batch);
  TF_TString *strings = TF_TensorData(tensor);
  long at = 0;
  for (long row = 0; row < batch; row++) {
    uint32_t length;
    if (at + 4 > feed->size) too_few_rows(feed, batch);
    memcpy(&length, feed->data + at, 4);
    if (at + 4 + (long)length > feed->size) too_few_rows(feed, batch);
    TF_TString_Init(&strings[row]);
    TF_TString_Copy(&strings[row], (const char *)feed->data + at + 4, length);
    at += 4 + length;
  }
  return tensor;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: session_run EXPORT_DIR CONFIG_HEX FETCH N_FEEDS (FEED DTYPE COLUMNS FILE)...\n");
    return 2;
  }
  TF_Status *status = TF_NewStatus();
  TF_SessionOptions *options = TF_NewSessionOptions();
  size_t config_size = strlen(argv[2]) / 2;
  unsigned char *config = malloc(config_size + 1);
  for (size_t i = 0; i < config_size; i++) sscanf(argv[2] + 2 * i, "%2hhx", &config[i]);
  TF_SetConfig(options, config, config_size, status);
  check(status, "session config");
  TF_Graph *graph = TF_NewGraph();
  const char *tags[] = {"serve"};
  TF_Session *session = TF_LoadSessionFromSavedModel(options, NULL, argv[1], tags, 1, graph, NULL, status);
  check(status, "loading the SavedModel");
  TF_Output fetch = port(graph, argv[3]);
  int count = atoi(argv[4]);
  if (count < 1 || count > MAX_FEEDS || argc != 5 + 4 * count) return 2;
  Feed feeds[MAX_FEEDS];
  for (int i = 0; i < count; i++) {
    char **arg = argv + 5 + 4 * i;
    feeds[i].port = port(graph, arg[0]);
    feeds[i].dtype = !strcmp(arg[1], "f32") ? TF_FLOAT : !strcmp(arg[1], "i64") ? TF_INT64 : TF_STRING;
    feeds[i].columns = atol(arg[2]);
    read_rows(&feeds[i], arg[3]);
  }
  long capacity = 1 << 22;
  double *times = malloc(sizeof(double) * capacity);
  long batch, min_calls;
  double seconds;
  while (scanf("%ld %lf %ld", &batch, &seconds, &min_calls) == 3) {
    TF_Output ports[MAX_FEEDS];
    TF_Tensor *values[MAX_FEEDS];
    for (int i = 0; i < count; i++) {
      ports[i] = feeds[i].port;
      values[i] = batch_tensor(&feeds[i], batch);
    }
    long calls = 0;
    double started = now_ms();
    for (long call = -3; call < 0 || ((now_ms() - started < seconds * 1e3 || call < min_calls) && call < capacity);
         call++) {
      TF_Tensor *output = NULL;
      double tick = now_ms();
      TF_SessionRun(session, NULL, ports, values, count, &fetch, &output, 1, NULL, 0, NULL, status);
      double took = now_ms() - tick;
      check(status, "TF_SessionRun");
      TF_DeleteTensor(output);
      if (call >= 0) times[calls++] = took;
      else started = now_ms();
    }
    for (long i = 0; i < calls; i++) printf(i ? " %.6f" : "%.6f", times[i]);
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < count; i++) TF_DeleteTensor(values[i]);
  }
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  return 0;
}
