package dev.xlake.hudi;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.hudi.storage.StorageConfiguration;
import org.apache.hudi.storage.StoragePath;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The xlake binary, found through {@code hoodie.xlake.binary} (a JVM system property, the
 * engine's Hadoop configuration — in Spark {@code spark.hadoop.hoodie.xlake.binary} — or
 * hoodie.properties), else the {@code XLAKE_BIN} environment variable, else {@code xlake} on
 * {@code PATH}. {@code hoodie.xlake.args} adds arguments (for example a catalog) to each call.
 */
final class XlakeCommand {
  private static final Logger LOG = LoggerFactory.getLogger(XlakeCommand.class);
  static final String BINARY = "hoodie.xlake.binary";
  static final String ARGS = "hoodie.xlake.args";
  static final String TIMEOUT = "hoodie.xlake.timeout.seconds";

  private final String binary;
  private final List<String> extraArgs;
  private final long timeoutSeconds;

  /** A mirror that did not happen: xlake's exit status and error text, or why it never ran. */
  static final class MirrorFailure extends Exception {
    private static final long serialVersionUID = 1L;

    MirrorFailure(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private XlakeCommand(String binary, List<String> extraArgs, long timeoutSeconds) {
    this.binary = binary;
    this.extraArgs = extraArgs;
    this.timeoutSeconds = timeoutSeconds;
  }

  static XlakeCommand resolve(Properties tableConfig, StorageConfiguration<?> conf)
      throws MirrorFailure {
    String binary = option(BINARY, tableConfig, conf);
    String origin = BINARY;
    if (binary == null && System.getenv("XLAKE_BIN") != null) {
      binary = System.getenv("XLAKE_BIN");
      origin = "XLAKE_BIN";
    }
    if (binary == null) {
      binary = onPath("xlake");
      origin = "PATH";
    }
    if (binary == null) {
      throw new MirrorFailure(
          "no xlake binary: set " + BINARY + " (Spark: spark.hadoop." + BINARY + "), XLAKE_BIN,"
              + " or put xlake on PATH",
          null);
    }
    File file = new File(binary);
    if (!file.isFile() || !file.canExecute()) {
      throw new MirrorFailure("the xlake binary " + binary + " (from " + origin + ") is not an"
          + " executable file", null);
    }
    String args = option(ARGS, tableConfig, conf);
    List<String> extra = args == null || args.isBlank()
        ? List.of() : Arrays.asList(args.trim().split("\\s+"));
    String timeout = option(TIMEOUT, tableConfig, conf);
    return new XlakeCommand(binary, extra, timeout == null ? 600 : Long.parseLong(timeout.trim()));
  }

  private static String option(String key, Properties tableConfig, StorageConfiguration<?> conf) {
    String value = System.getProperty(key);
    if (value == null && conf != null) {
      value = conf.getString(key).orElse(null);
    }
    if (value == null) {
      value = tableConfig.getProperty(key);
    }
    return value == null || value.isBlank() ? null : value.trim();
  }

  private static String onPath(String name) {
    String path = System.getenv("PATH");
    if (path == null) {
      return null;
    }
    for (String dir : path.split(File.pathSeparator)) {
      File candidate = new File(dir, name);
      if (candidate.isFile() && candidate.canExecute()) {
        return candidate.getPath();
      }
    }
    return null;
  }

  /** The table as xlake names it: a local path, or an s3://, gs://, az:// URL. */
  static String tableLocation(StoragePath basePath) {
    URI uri = basePath.toUri();
    String scheme = uri.getScheme();
    if (scheme == null || "file".equals(scheme)) {
      return uri.getPath();
    }
    if ("s3a".equals(scheme) || "s3n".equals(scheme)) {
      return "s3" + basePath.toString().substring(scheme.length());
    }
    return basePath.toString();
  }

  /** Runs {@code xlake <args...>}; a non-zero exit is a failure carrying xlake's stderr. */
  void run(String... args) throws MirrorFailure {
    List<String> command = new ArrayList<>();
    command.add(binary);
    command.addAll(Arrays.asList(args));
    command.addAll(extraArgs);
    long start = System.nanoTime();
    Process process;
    try {
      process = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD)
          .start();
    } catch (IOException e) {
      throw new MirrorFailure("could not start " + String.join(" ", command) + ": " + e, e);
    }
    String stderr;
    int status;
    try (InputStream err = process.getErrorStream()) {
      stderr = new String(err.readAllBytes(), StandardCharsets.UTF_8).trim();
      if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        throw new MirrorFailure("`" + String.join(" ", command) + "` did not finish in "
            + timeoutSeconds + " s (" + TIMEOUT + ")", null);
      }
      status = process.exitValue();
    } catch (IOException e) {
      process.destroyForcibly();
      throw new MirrorFailure("reading the stderr of " + String.join(" ", command) + ": " + e, e);
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new MirrorFailure("interrupted while " + String.join(" ", command) + " ran", e);
    }
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    if (status != 0) {
      throw new MirrorFailure("`" + String.join(" ", command) + "` exited " + status + ": "
          + stderr, null);
    }
    LOG.info("xlake: `{}` took {} ms", String.join(" ", command), millis);
  }
}
