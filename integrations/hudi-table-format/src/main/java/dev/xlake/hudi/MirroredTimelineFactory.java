package dev.xlake.hudi;

import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieActiveTimeline;
import org.apache.hudi.common.table.timeline.TimelineLayout;
import org.apache.hudi.common.table.timeline.versioning.v2.TimelineV2Factory;

/** Hudi's own version-2 timelines, but the active one is a {@link MirroredActiveTimeline}. */
final class MirroredTimelineFactory extends TimelineV2Factory {
  private static final long serialVersionUID = 1L;

  MirroredTimelineFactory(TimelineLayout layout) {
    super(layout);
  }

  @Override
  public HoodieActiveTimeline createActiveTimeline(HoodieTableMetaClient metaClient) {
    return new MirroredActiveTimeline(metaClient);
  }

  @Override
  public HoodieActiveTimeline createActiveTimeline(
      HoodieTableMetaClient metaClient, boolean applyLayoutFilter) {
    return new MirroredActiveTimeline(metaClient, applyLayoutFilter);
  }
}
