/* lomas-demo record (live sessions). */
#ifndef LOMAS_DEMO_RECORD_SESSION_H
#define LOMAS_DEMO_RECORD_SESSION_H

/* argv[0] is "record"; returns the process exit status. */
int record_main(int argc, char **argv);

#endif
