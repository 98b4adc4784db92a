/*
 * Driver that runs a libFuzzer target over every file in the folders (or
 * files) named on the command line, for builds without -fsanitize=fuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	long len;
	uint8_t *buf;
	if (!f) {
		perror(path);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (!buf || (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
		fprintf(stderr, "%s: read failed\n", path);
		fclose(f);
		free(buf);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *e;
			while (d && (e = readdir(d))) {
				char path[4096];
				if (e->d_name[0] == '.')
					continue;
				snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
				bad += run_file(path);
				files++;
			}
			if (d)
				closedir(d);
		} else {
			bad += run_file(argv[i]);
			files++;
		}
	}
	printf("replayed %d inputs\n", files);
	return bad || files == 0;
}
