package dev.xlake.hudi;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.HoodieTimeline;
import org.apache.hudi.common.table.timeline.InstantGenerator;
import org.apache.hudi.exception.HoodieIOException;
import org.apache.hudi.storage.HoodieStorage;
import org.apache.hudi.storage.StoragePath;

/**
 * Which Hudi instants the Iceberg mirror in {@code metadata/} holds: each xlake snapshot names
 * its source instant in {@code XTABLE_METADATA.sourceIdentifier}. Read from the metadata file
 * {@code metadata/version-hint.text} points at.
 */
final class MirrorState {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Null when the table has no mirror yet. */
  private final Set<String> mirrored;
  private final String newest;

  private MirrorState(Set<String> mirrored, String newest) {
    this.mirrored = mirrored;
    this.newest = newest;
  }

  /** Write instants: the ones the format's timeline may hide. */
  static boolean isWrite(HoodieInstant instant) {
    String action = instant.getAction();
    return HoodieTimeline.COMMIT_ACTION.equals(action)
        || HoodieTimeline.DELTA_COMMIT_ACTION.equals(action)
        || HoodieTimeline.REPLACE_COMMIT_ACTION.equals(action);
  }

  static MirrorState read(HoodieTableMetaClient metaClient) {
    StoragePath folder = new StoragePath(metaClient.getBasePath(), "metadata");
    HoodieStorage storage = metaClient.getStorage();
    StoragePath hint = new StoragePath(folder, "version-hint.text");
    try {
      if (!storage.exists(hint)) {
        return new MirrorState(null, null);
      }
      String version = text(storage, hint).trim();
      StoragePath file = new StoragePath(folder, "v" + version + ".metadata.json");
      JsonNode snapshots = JSON.readTree(text(storage, file)).path("snapshots");
      Set<String> ids = new HashSet<>();
      String newest = null;
      for (JsonNode snapshot : snapshots) {
        JsonNode marker = snapshot.path("summary").path("XTABLE_METADATA");
        if (!marker.isTextual()) {
          continue;
        }
        String id = JSON.readTree(marker.asText()).path("sourceIdentifier").asText(null);
        if (id != null) {
          ids.add(id);
          newest = newest == null || id.compareTo(newest) > 0 ? id : newest;
        }
      }
      return new MirrorState(ids, newest);
    } catch (IOException e) {
      throw new HoodieIOException("xlake: could not read the Iceberg mirror in " + folder
          + " to tell which instants it holds", e);
    }
  }

  private static String text(HoodieStorage storage, StoragePath path) throws IOException {
    try (InputStream in = storage.open(path)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /**
   * The completed write instants the mirror does not hold yet: newer than its newest snapshot
   * and without one (older instants whose snapshots were expired stay completed). A table
   * without a mirror hides its only completed write (the first write's mirror never ran), but
   * not a native history of several: those the next mirror adopts.
   */
  private boolean unmirrored(HoodieInstant instant, int completedWrites) {
    if (!instant.isCompleted() || !isWrite(instant)) {
      return false;
    }
    if (mirrored == null) {
      return completedWrites == 1;
    }
    String id = instant.requestedTime();
    return !mirrored.contains(id) && (newest == null || id.compareTo(newest) > 0);
  }

  /** The instants as Hudi should see them: unmirrored completed writes shown as inflight. */
  List<HoodieInstant> hideUnmirrored(List<HoodieInstant> instants, InstantGenerator generator) {
    int completedWrites = 0;
    for (HoodieInstant instant : instants) {
      if (instant.isCompleted() && isWrite(instant)) {
        completedWrites++;
      }
    }
    Map<String, HoodieInstant> shown = new LinkedHashMap<>();
    for (HoodieInstant instant : instants) {
      HoodieInstant seen = instant;
      if (unmirrored(instant, completedWrites)) {
        seen = generator.createNewInstant(
            HoodieInstant.State.INFLIGHT, instant.getAction(), instant.requestedTime());
      }
      shown.putIfAbsent(seen.getState() + "_" + seen.getAction() + "_" + seen.requestedTime(),
          seen);
    }
    return new ArrayList<>(shown.values());
  }
}
