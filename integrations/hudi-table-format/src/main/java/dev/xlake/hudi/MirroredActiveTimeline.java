package dev.xlake.hudi;

import java.util.List;
import java.util.Set;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieActiveTimeline;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.versioning.v2.ActiveTimelineV2;

/**
 * Hudi's active timeline in which a completed write counts as completed only once the Iceberg
 * mirror holds its snapshot ({@link MirrorState}); until then it shows as inflight, so Hudi's
 * readers skip it and the next writer rolls it back (Hudi then deletes its completed file too:
 * {@code CopyOnWriteRollbackActionExecutor} reverts it in the native timeline).
 */
final class MirroredActiveTimeline extends ActiveTimelineV2 {
  private static final long serialVersionUID = 1L;

  MirroredActiveTimeline(HoodieTableMetaClient metaClient) {
    super(metaClient);
  }

  MirroredActiveTimeline(HoodieTableMetaClient metaClient, boolean applyLayoutFilter) {
    super(metaClient, applyLayoutFilter);
  }

  @Override
  protected List<HoodieInstant> getInstantsFromFileSystem(
      HoodieTableMetaClient metaClient, Set<String> extensions, boolean applyLayoutFilters) {
    List<HoodieInstant> instants =
        super.getInstantsFromFileSystem(metaClient, extensions, applyLayoutFilters);
    return MirrorState.read(metaClient).hideUnmirrored(instants, metaClient.getInstantGenerator());
  }

  @Override
  public HoodieActiveTimeline reload() {
    return new MirroredActiveTimeline(metaClient);
  }
}
